package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/teams/teamsfake"
	"github.com/arbiterhq/arbiter/web"
)

const (
	teamsApp     = "1f0e2c7a-5b1d-4e8f-9a3c-7d6b5e4f3a21"
	teamsTenant  = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	teamsSecret  = "s3cret~value.1"
	teamsChannel = "19:approvals@thread.tacv2"
)

// teamsSite is a server whose account owner@example.com has a bot on the
// fake Bot Framework; the owner's Teams user 29:owner is linked to them.
type teamsSite struct {
	store     *db.DB
	fake      *teamsfake.Fake
	endpoint  string
	accountID string
	clock     *testClock
}

func newTeamsSite(t *testing.T, dialect string) *teamsSite {
	t.Helper()
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{}
	store := dbtest.Open(t, dialect, db.Options{Secrets: k, Now: clock.Now})
	fake := teamsfake.New(t)
	fake.AddBot(teamsApp, teamsSecret)
	acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ConnectTeams(ctx, acct.ID, arbiter.TeamsConnectionInput{AppID: teamsApp, TenantID: teamsTenant,
		ClientSecret: teamsSecret}, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []teams.Member{
		{ID: "29:owner", Name: "Owner", AADObjectID: "aad-owner", Email: "owner@example.com"},
		{ID: "29:ann", Name: "Ann Lee", AADObjectID: "aad-ann", UserPrincipalName: "Ann@Example.com"},
		{ID: "29:nobody", Name: "Nobody", AADObjectID: "aad-nobody", Email: "nobody@example.com"},
	} {
		fake.AddMember(m)
	}
	connector := &teams.Connector{Tokens: &teams.Tokens{LoginURL: fake.LoginURL}}
	verifier := &teams.Verifier{MetadataURL: fake.MetadataURL}
	t.Cleanup(verifier.Close)
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	bot := &teams.Bot{Store: store, Connector: connector, Logger: discardLogger(),
		DeskURL: func(id string) string { return srv.URL + "/review/tasks/" + id },
		LinkURL: func(token string) string { return srv.URL + "/review/chat-links/" + token }}
	rt := &web.Router{Services: web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Queue: store, Teams: store},
		KeyChecker: web.NewKeyChecker(store, nil), Logger: discardLogger(), Teams: bot, TeamsVerifier: verifier}
	rt.Site = handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL}
	srv.Config.Handler = rt.Routes()
	s := &teamsSite{store: store, fake: fake, endpoint: srv.URL + "/integrations/teams/messages", accountID: acct.ID, clock: clock}
	s.link(t, "29:owner", "owner@example.com")
	return s
}

// link links the Teams user to the person who signs in with email, as
// their visit to the link page would.
func (s *teamsSite) link(t *testing.T, user, email string) {
	t.Helper()
	p, err := s.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	token, err := s.store.OfferChatLink(ctx, s.accountID, arbiter.ChatUser{Provider: arbiter.ChatTeams, Workspace: teamsApp, UserID: user, Email: email})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.LinkChatUser(ctx, token, arbiter.Actor{Email: email, PersonID: p.ID}); err != nil {
		t.Fatal(err)
	}
}

// invoke is the activity of user's click on a card's Action.Execute.
func invoke(user, verb string, data map[string]string) *teams.Activity {
	value, _ := json.Marshal(map[string]any{"action": map[string]any{"type": "Action.Execute", "verb": verb, "data": data},
		"trigger": "manual"})
	return &teams.Activity{Type: teams.TypeInvoke, Name: teams.InvokeCardAction, ID: "act-1",
		From:         &teams.Account{ID: user, AADObjectID: "aad-" + strings.TrimPrefix(user, "29:")},
		Recipient:    &teams.Account{ID: "28:" + teamsApp},
		Conversation: &teams.Conversation{ID: teamsChannel, ConversationType: arbiter.TeamsChannel, TenantID: teamsTenant},
		Value:        value}
}

// click sends user's click with a right token and returns the card the
// bot answered with, as JSON.
func (s *teamsSite) click(t *testing.T, user, verb string, data map[string]string) string {
	t.Helper()
	status, body := s.fake.Send(t, s.endpoint, s.fake.Token(t, teamsApp), invoke(user, verb, data))
	if status != http.StatusOK {
		t.Fatalf("invoke: %d %s", status, body)
	}
	var r teams.InvokeResponse
	if err := json.Unmarshal(body, &r); err != nil || r.StatusCode != 200 || r.Type != teams.ContentTypeCard {
		t.Fatalf("invoke answered %s (%v)", body, err)
	}
	card, _ := json.Marshal(r.Value)
	return string(card)
}

func (s *teamsSite) routed(t *testing.T, body string) *arbiter.Task {
	t.Helper()
	in, err := arbiter.ParseTaskCreate([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	task, err := s.store.CreateTask(ctx, s.accountID, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.ClaimTasks(ctx, "wrk_test", 100, time.Minute); err != nil {
		t.Fatal(err)
	}
	v, c := "approve", 0.42
	now := arbiter.TimestampOf(time.Now())
	if err := s.store.FinishAgentAttempt(ctx, "wrk_test", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
		Verdict: &v, Confidence: &c, StartedAt: now, FinishedAt: &now}, Next: arbiter.StatusHumanNeeded}); err != nil {
		t.Fatal(err)
	}
	return task
}

func (s *teamsSite) attempts(t *testing.T, taskID string) []arbiter.Attempt {
	t.Helper()
	task, err := s.store.FindTaskByID(ctx, s.accountID, taskID)
	if err != nil {
		t.Fatal(err)
	}
	var out []arbiter.Attempt
	for _, a := range task.Attempts {
		if a.Tier == arbiter.TierHuman {
			out = append(out, a)
		}
	}
	return out
}

// TestTeamsMessages_RefusesBadTokens: an invoke whose token is expired,
// for another bot, of another issuer, signed by a key the Bot Framework
// does not list, for another service URL, or missing, is refused 401 and
// decides nothing; one of another tenant is refused too; the same invoke
// with a right token decides.
func TestTeamsMessages_RefusesBadTokens(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			task := s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`)
			click := invoke("29:owner", teams.VerbDecide, map[string]string{"taskId": task.ID, "verdict": "approve"})
			for name, auth := range map[string]string{
				"Expired":         s.fake.Token(t, teamsApp, teamsfake.Expired(10*time.Minute)),
				"WrongAudience":   s.fake.Token(t, teamsApp, teamsfake.Audience("0b0b0b0b-0000-4000-8000-000000000000")),
				"WrongIssuer":     s.fake.Token(t, teamsApp, teamsfake.Issuer("https://sts.windows.net/evil/")),
				"BadSignature":    s.fake.Token(t, teamsApp, teamsfake.ForeignKey()),
				"WrongServiceURL": s.fake.Token(t, teamsApp, teamsfake.ServiceURL("https://smba.evil.example/")),
				"Missing":         "",
			} {
				if status, body := s.fake.Send(t, s.endpoint, auth, click); status != http.StatusUnauthorized {
					t.Errorf("%s: %d %s, want 401", name, status, body)
				}
			}
			elsewhere := invoke("29:owner", teams.VerbDecide, map[string]string{"taskId": task.ID, "verdict": "approve"})
			elsewhere.Conversation.TenantID = "00000000-0000-4000-8000-000000000000"
			if status, _ := s.fake.Send(t, s.endpoint, s.fake.Token(t, teamsApp), elsewhere); status != http.StatusUnauthorized {
				t.Errorf("another tenant: %d, want 401", status)
			}
			if n := len(s.attempts(t, task.ID)); n != 0 {
				t.Fatalf("refused invokes recorded %d attempts", n)
			}
			card := s.click(t, "29:owner", teams.VerbDecide, map[string]string{"taskId": task.ID, "verdict": "approve"})
			if !strings.Contains(card, `{"text":"approve","type":"TextRun","weight":"Bolder"}`) || strings.Contains(card, "Action.Execute") {
				t.Errorf("the decider's card is not the outcome without buttons:\n%s", card)
			}
			if a := s.attempts(t, task.ID); len(a) != 1 || *a[0].Reviewer != "owner@example.com" {
				t.Fatalf("attempts %+v, want one by owner@example.com", a)
			}
		})
	}
}

// TestTeamsMessages_ValidInvokeDecidesOnce: a linked member's view of
// the card has one button per verdict and the reason field; their click
// decides with the reason, via Microsoft Teams in the audit log; the same
// invoke delivered again decides nothing more and answers the outcome.
func TestTeamsMessages_ValidInvokeDecidesOnce(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			task := s.routed(t, `{"prompt":"Refund order 77?","allowed_verdicts":["approve","reject"]}`)
			view := s.click(t, "29:owner", teams.VerbView, map[string]string{"taskId": task.ID})
			if strings.Count(view, `"verb":"decide"`) != 2 || !strings.Contains(view, `"id":"reason"`) {
				t.Fatalf("the member's view lacks the buttons or the reason:\n%s", view)
			}
			data := map[string]string{"taskId": task.ID, "verdict": "reject", "reason": "  duplicate order  "}
			for i := range 3 {
				card := s.click(t, "29:owner", teams.VerbDecide, data)
				if !strings.Contains(card, `{"text":"reject","type":"TextRun","weight":"Bolder"}`) {
					t.Errorf("click %d answered:\n%s", i+1, card)
				}
			}
			a := s.attempts(t, task.ID)
			if len(a) != 1 || *a[0].Verdict != "reject" || a[0].Rationale != "duplicate order" {
				t.Fatalf("attempts %+v, want one reject with its reason", a)
			}
			events, err := s.store.ListAuditEvents(ctx, s.accountID, 20)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range events {
				found = found || e.Kind == arbiter.AuditReviewDecided && strings.HasSuffix(e.Detail, "via Microsoft Teams")
			}
			if !found {
				t.Errorf("no audit line via Microsoft Teams: %+v", events)
			}
		})
	}
}

// TestTeamsMessages_NonMembersAreRefused: a Teams user whose address is no
// member's gets a refusal card; a member of the account not yet linked
// gets a link to link their Teams user (only they can use it), not a
// decision; nothing changes in either case.
func TestTeamsMessages_NonMembersAreRefused(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			owner, err := s.store.FindAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			p, _ := s.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "owner@example.com",
				Email: "owner@example.com", EmailVerified: true})
			_, invite, err := s.store.CreateInvitation(ctx, owner.ID, "ann@example.com", arbiter.RoleReviewer, arbiter.Actor{Email: p.Email, PersonID: p.ID})
			if err != nil {
				t.Fatal(err)
			}
			ann, _ := s.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "ann@example.com",
				Email: "ann@example.com", EmailVerified: true})
			if _, err := s.store.AcceptInvitation(ctx, invite, ann.ID, arbiter.Client{}); err != nil {
				t.Fatal(err)
			}
			task := s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`)
			data := map[string]string{"taskId": task.ID, "verdict": "approve"}
			if card := s.click(t, "29:nobody", teams.VerbDecide, data); !strings.Contains(card, teams.RefusalText) {
				t.Errorf("a non-member's card:\n%s", card)
			}
			card := s.click(t, "29:ann", teams.VerbDecide, data)
			if !strings.Contains(card, "sign in as ann@example.com") || !strings.Contains(card, "/review/chat-links/") ||
				strings.Contains(card, `"verb":"decide"`) {
				t.Errorf("an unlinked member's card:\n%s", card)
			}
			if n := len(s.attempts(t, task.ID)); n != 0 {
				t.Errorf("%d attempts recorded", n)
			}
		})
	}
}

// TestTeamsMessages_ConversationUpdates: the bot added to a channel keeps
// its conversation reference under the team's and channel's names; added
// to a person's chat, under their address; removed, forgets it.
func TestTeamsMessages_ConversationUpdates(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			bot := teams.Account{ID: "28:" + teamsApp}
			added := &teams.Activity{Type: teams.TypeConversationUpdate, Recipient: &bot, MembersAdded: []teams.Account{bot},
				Conversation: &teams.Conversation{ID: teamsChannel, ConversationType: arbiter.TeamsChannel, TenantID: teamsTenant},
				ChannelData: &teams.ChannelData{Team: &teams.IDName{ID: "19:team", Name: "Finance"},
					Channel: &teams.IDName{ID: teamsChannel, Name: "Approvals"}, Tenant: &teams.IDName{ID: teamsTenant}}}
			personal := &teams.Activity{Type: teams.TypeConversationUpdate, Recipient: &bot, MembersAdded: []teams.Account{bot},
				From:         &teams.Account{ID: "29:ann"},
				Conversation: &teams.Conversation{ID: "a:personal-ann", ConversationType: arbiter.TeamsPersonal, TenantID: teamsTenant}}
			for _, a := range []*teams.Activity{added, personal} {
				if status, body := s.fake.Send(t, s.endpoint, s.fake.Token(t, teamsApp), a); status != http.StatusOK {
					t.Fatalf("conversationUpdate: %d %s", status, body)
				}
			}
			list, err := s.store.ListTeamsConversations(ctx, s.accountID)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]string{}
			for _, c := range list {
				names[c.Name] = c.ServiceURL
			}
			if names["finance/approvals"] != s.fake.ServiceURL || names["@ann@example.com"] != s.fake.ServiceURL || len(names) != 2 {
				t.Fatalf("conversations %v", names)
			}
			removed := *added
			removed.MembersAdded, removed.MembersGone = nil, []teams.Account{bot}
			if status, _ := s.fake.Send(t, s.endpoint, s.fake.Token(t, teamsApp), &removed); status != http.StatusOK {
				t.Fatal(status)
			}
			if list, _ := s.store.ListTeamsConversations(ctx, s.accountID); len(list) != 1 || list[0].Name != "@ann@example.com" {
				t.Errorf("after the removal: %+v", list)
			}
		})
	}
}

// TestTeamsMessages_VotesAreBlindAndCountedOncePerPerson: on a task asking
// two votes, the owner votes through Teams: their card says the vote is
// recorded and shows neither the verifier's answer nor anyone's vote. The
// same person then votes again through Teams, the desk, Slack and their
// digest's decision link: each is refused and the task still holds one
// vote. A second person's vote on the desk decides it, and the owner's
// card then shows the outcome.
func TestTeamsMessages_VotesAreBlindAndCountedOncePerPerson(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			owner, err := s.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "owner@example.com",
				Email: "owner@example.com", EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			_, invite, err := s.store.CreateInvitation(ctx, s.accountID, "ann@example.com", arbiter.RoleReviewer, arbiter.Actor{Email: owner.Email, PersonID: owner.ID})
			if err != nil {
				t.Fatal(err)
			}
			ann, _ := s.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "ann@example.com",
				Email: "ann@example.com", EmailVerified: true})
			if _, err := s.store.AcceptInvitation(ctx, invite, ann.ID, arbiter.Client{}); err != nil {
				t.Fatal(err)
			}
			task := s.routed(t, `{"prompt":"Wire 90,000 EUR?","allowed_verdicts":["approve","reject"],"reviews_required":2}`)

			card := s.click(t, "29:owner", teams.VerbDecide, map[string]string{"taskId": task.ID, "verdict": "approve"})
			if !strings.Contains(card, "Your vote, “approve”, is recorded") {
				t.Fatalf("the voter's card:\n%s", card)
			}
			for _, leak := range []string{"0.42", "Verifier", "confidence"} {
				if strings.Contains(card, leak) {
					t.Errorf("a vote's card shows %q:\n%s", leak, card)
				}
			}
			if !strings.Contains(card, "Blind vote") {
				t.Errorf("the card does not say the vote is blind:\n%s", card)
			}

			// The same person again, through every channel.
			again := s.click(t, "29:owner", teams.VerbDecide, map[string]string{"taskId": task.ID, "verdict": "reject"})
			if !strings.Contains(again, "voted on this task already") {
				t.Errorf("a second Teams vote answered:\n%s", again)
			}
			if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "reject",
				Reviewer: owner.Email, ReviewerID: owner.ID}); arbiter.ErrorCode(err) != arbiter.ECONFLICT {
				t.Errorf("a second vote on the desk: %v", err)
			}
			slackVote(t, s, owner, task.ID)
			minute := time.Minute
			if err := s.store.SetNotifyAfter(ctx, s.accountID, &minute, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			s.clock.Advance(2 * time.Minute)
			if _, err := s.store.ClaimDigests(ctx, 10); err != nil {
				t.Fatal(err)
			}
			mails, err := s.store.ClaimMail(ctx, "test", 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			used := false
			for _, m := range mails {
				_, body, err := m.Compose(arbiter.MailLinks{QueueURL: "https://review.example.com/review"})
				if err != nil || m.Kind != arbiter.MailDigest || m.To != owner.Email {
					continue
				}
				for _, l := range decisionLinkPattern.FindAllStringSubmatch(body, -1) {
					used = true
					if _, err := s.store.UseDecisionLink(ctx, l[2], owner.ID, arbiter.Client{}); err == nil {
						t.Error("the owner's decision link cast a second vote")
					}
				}
			}
			if !used {
				t.Error("the owner's digest held no decision link to try")
			}
			if a := s.attempts(t, task.ID); len(a) != 1 {
				t.Fatalf("%d votes after one person voted through four channels, want 1", len(a))
			}

			if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "approve",
				Reviewer: ann.Email, ReviewerID: ann.ID}); err != nil {
				t.Fatal(err)
			}
			done := s.click(t, "29:owner", teams.VerbView, map[string]string{"taskId": task.ID})
			if !strings.Contains(done, `{"text":"approve","type":"TextRun","weight":"Bolder"}`) || strings.Contains(done, "Action.Execute") {
				t.Errorf("after the second vote, the card:\n%s", done)
			}
		})
	}
}

// slackVote has the person vote on the task through Slack, as the Slack
// user linked to them, and checks that Slack refuses it.
func slackVote(t *testing.T, s *teamsSite, p *arbiter.Person, taskID string) {
	t.Helper()
	fake := slackfake.New(t)
	conn, err := s.store.ConnectSlack(ctx, s.accountID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-1",
		SigningSecret: slackSecret, DefaultChannel: "#refunds"}, "T0FAKE", arbiter.Actor{Email: arbiter.OperatorActor})
	if err != nil {
		t.Fatal(err)
	}
	token, err := s.store.OfferChatLink(ctx, s.accountID, arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: "T0FAKE", UserID: "UOWNER", Email: p.Email})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.LinkChatUser(ctx, token, arbiter.Actor{Email: p.Email, PersonID: p.ID}); err != nil {
		t.Fatal(err)
	}
	in := &slack.Interactions{Store: s.store, Slack: slack.NewClient(fake.URL, nil), Logger: discardLogger()}
	cb, err := slack.ParseInteraction((&slackSite{fake: fake}).click("UOWNER", taskID, "reject"))
	if err != nil {
		t.Fatal(err)
	}
	in.Handle(ctx, conn, cb)
	var answer struct{ Text string }
	json.Unmarshal([]byte(fake.WaitCalls(t, "response", 1)[0].Body), &answer)
	if !strings.Contains(answer.Text, "voted on this task already") {
		t.Errorf("a second vote through Slack answered %q", answer.Text)
	}
}
