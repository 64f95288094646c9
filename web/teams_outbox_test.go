package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/teams/teamsfake"
	"github.com/arbiterhq/arbiter/worker"
)

const teamsRiskChannel = "19:risk@thread.tacv2"

// join has the bot added to the Finance team's channel, as Teams tells
// it, which the account then knows as finance/<lower-case name>.
func (s *teamsSite) join(t *testing.T, channelID, name string) {
	t.Helper()
	bot := teams.Account{ID: "28:" + teamsApp}
	added := &teams.Activity{Type: teams.TypeConversationUpdate, Recipient: &bot, MembersAdded: []teams.Account{bot},
		Conversation: &teams.Conversation{ID: channelID, ConversationType: arbiter.TeamsChannel, TenantID: teamsTenant},
		ChannelData: &teams.ChannelData{Team: &teams.IDName{ID: "19:team", Name: "Finance"},
			Channel: &teams.IDName{ID: channelID, Name: name}, Tenant: &teams.IDName{ID: teamsTenant}}}
	if status, body := s.fake.Send(t, s.endpoint, s.fake.Token(t, teamsApp), added); status != http.StatusOK {
		t.Fatalf("conversationUpdate: %d %s", status, body)
	}
}

// deliver runs a Teams deliverer of the site's store, on the fake Bot
// Framework, until the test ends or stop is called.
func (s *teamsSite) deliver(t *testing.T, pace time.Duration) (stop func()) {
	t.Helper()
	return s.deliverWith(t, worker.TeamsConfig{Pace: pace})
}

// deliverWith is deliver with cfg (its store the site's unless cfg has
// one; its connector, desk, logger and poll set here).
func (s *teamsSite) deliverWith(t *testing.T, cfg worker.TeamsConfig) (stop func()) {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = s.store
	}
	cfg.Logger, cfg.Poll = discardLogger(), 20*time.Millisecond
	cfg.Teams = &teams.Connector{Tokens: &teams.Tokens{LoginURL: s.fake.LoginURL}}
	cfg.DeskURL = func(id string) string { return "http://review.test/review/tasks/" + id }
	d := worker.NewTeamsDeliverer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// cardOf returns the Adaptive Card an activity carries, as JSON.
func cardOf(t *testing.T, p teamsfake.Posted) string {
	t.Helper()
	if len(p.Activity.Attachments) != 1 || p.Activity.Attachments[0].ContentType != teams.ContentTypeCard {
		t.Fatalf("the activity carries no one Adaptive Card: %s", p.Raw)
	}
	b, err := json.Marshal(p.Activity.Attachments[0].Content)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unsent stops the deliverer and returns the Teams messages still to
// send within an hour.
func (s *teamsSite) unsent(t *testing.T, stop func()) []*arbiter.TeamsDelivery {
	t.Helper()
	stop()
	s.clock.Advance(time.Hour)
	left, err := s.store.ClaimTeamsMessages(ctx, "test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// TestTeamsOutbox_PostsThenUpdatesEveryCopy: a task sent to a person posts
// one card to the account's default conversation, with the prompt, the
// context's fields, the verifier's answer, the deciders named for their
// own view and a link to the desk (schema 1.5, Action.Execute); a task
// naming two conversations in its notify list posts one card to each and
// none to the default; a decision on the desk then updates both cards in
// place to the outcome, without buttons or refresh.
func TestTeamsOutbox_PostsThenUpdatesEveryCopy(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			s.join(t, teamsRiskChannel, "Risk")
			if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			s.deliver(t, time.Millisecond)
			first := s.routed(t, `{"prompt":"Refund order 1234?","allowed_verdicts":["approve","reject"],
				"context":{"customer":"Ann <ann@example.com>","amount":12}}`)
			post := s.fake.WaitPosted(t, 1)[0]
			if post.Conversation != teamsChannel {
				t.Errorf("posted to %q, want the default %q", post.Conversation, teamsChannel)
			}
			card := cardOf(t, post)
			for _, want := range []string{`"type":"AdaptiveCard"`, `"version":"1.5"`, `"text":"Refund order 1234?"`,
				`"text":"customer: "`, `"text":"Ann \u003cann@example.com\u003e"`, `"text":"amount: "`,
				`{"text":"approve","type":"TextRun","weight":"Bolder"}`, "0.42 confidence", `"userIds":["29:owner"]`,
				`"type":"Action.Execute"`, `"verb":"view"`, `"url":"http://review.test/review/tasks/` + first.ID + `"`} {
				if !strings.Contains(card, want) {
					t.Errorf("the card lacks %s:\n%s", want, card)
				}
			}
			if strings.Contains(card, `"verb":"decide"`) {
				t.Errorf("the card everyone sees has decision buttons:\n%s", card)
			}
			if post.Activity.Summary != "Refund order 1234?" {
				t.Errorf("summary %q", post.Activity.Summary)
			}

			second := s.routed(t, `{"prompt":"Wire 9,000 EUR?","allowed_verdicts":["approve","reject"],
				"notify":["teams:finance/risk","teams:finance/approvals"]}`)
			posts := s.fake.WaitPosted(t, 3)
			got := map[string]string{}
			for _, p := range posts[1:] {
				if c := cardOf(t, p); strings.Contains(c, "Wire 9,000 EUR?") {
					got[p.Conversation] = p.ActivityID
				}
			}
			if len(got) != 2 || got[teamsChannel] == "" || got[teamsRiskChannel] == "" {
				t.Fatalf("the second task's posts: %v, want one to each conversation of its list", got)
			}

			if _, err := s.store.DecideTask(ctx, s.accountID, second.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			updates := s.fake.WaitUpdates(t, 2)
			for _, u := range updates {
				if got[u.Conversation] != u.ActivityID {
					t.Errorf("updated %s in %s, not a card of the task", u.ActivityID, u.Conversation)
				}
				c := cardOf(t, u)
				if !strings.Contains(c, `{"text":"reject","type":"TextRun","weight":"Bolder"}`) || !strings.Contains(c, "r@example.com") ||
					strings.Contains(c, "Action.Execute") || strings.Contains(c, "refresh") {
					t.Errorf("the update is not the outcome without buttons:\n%s", c)
				}
			}
			if updates[0].Conversation == updates[1].Conversation {
				t.Errorf("both updates went to %s", updates[0].Conversation)
			}
			if n := len(s.fake.Posted()); n != 3 {
				t.Errorf("%d posts, want 3", n)
			}
		})
	}
}

// TestTeamsOutbox_AClickUpdatesEveryCard: a member's click on one card
// decides, and every card of the task is then updated to the outcome;
// the same invoke delivered three times queues one update per card.
func TestTeamsOutbox_AClickUpdatesEveryCard(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			s.join(t, teamsRiskChannel, "Risk")
			stop := s.deliver(t, time.Millisecond)
			task := s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],
				"notify":["teams:finance/risk","teams:finance/approvals"]}`)
			s.fake.WaitPosted(t, 2)
			for range 3 {
				s.click(t, "29:owner", teams.VerbDecide, map[string]string{"taskId": task.ID, "verdict": "approve"})
			}
			for _, u := range s.fake.WaitUpdates(t, 2) {
				if c := cardOf(t, u); !strings.Contains(c, `{"text":"approve","type":"TextRun","weight":"Bolder"}`) || strings.Contains(c, "Action.Execute") {
					t.Errorf("the update of %s is not the outcome:\n%s", u.Conversation, c)
				}
			}
			if left := s.unsent(t, stop); len(left) != 0 || len(s.fake.Updates()) != 2 {
				t.Errorf("%d updates sent and %d left after three clicks, want one per card (2)", len(s.fake.Updates()), len(left))
			}
			if a := s.attempts(t, task.ID); len(a) != 1 {
				t.Errorf("%d attempts, want 1", len(a))
			}
		})
	}
}

// TestTeamsOutbox_HonoursRetryAfter: a post answered 429 with Retry-After:
// 3 is sent again no sooner than 3 s later (a first retry waits 1 s), and
// once.
func TestTeamsOutbox_HonoursRetryAfter(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			s.fake.RateLimit(http.MethodPost, 3*time.Second)
			s.deliver(t, time.Millisecond)
			s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`)
			post := s.fake.WaitPosted(t, 1)[0]
			throttled := s.fake.Throttled()
			if len(throttled) != 1 {
				t.Fatalf("%d calls answered 429, want 1", len(throttled))
			}
			if gap := post.At.Sub(throttled[0].At); gap < 3*time.Second {
				t.Errorf("posted %v after a 429 asking for 3s", gap)
			}
			if n := len(s.fake.Posted()); n != 1 {
				t.Errorf("%d posts, want 1", n)
			}
		})
	}
}

// TestTeamsOutbox_RemindersPostAgain: a reminder asks the conversation
// again, as Slack's do: a second card of the task is posted, and the
// decision then updates both.
func TestTeamsOutbox_RemindersPostAgain(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			s.deliver(t, time.Millisecond)
			task := s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],
				"reminders":["1m"]}`)
			s.fake.WaitPosted(t, 1)
			s.clock.Advance(2 * time.Minute)
			if _, err := s.store.FireDueAlerts(ctx, 10); err != nil {
				t.Fatal(err)
			}
			s.fake.WaitPosted(t, 2)
			if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			posted := map[string]bool{}
			for _, p := range s.fake.Posted() {
				posted[p.ActivityID] = true
			}
			updates := s.fake.WaitUpdates(t, 2)
			if !posted[updates[0].ActivityID] || !posted[updates[1].ActivityID] || updates[0].ActivityID == updates[1].ActivityID {
				t.Errorf("updated %s and %s, want both posts", updates[0].ActivityID, updates[1].ActivityID)
			}
		})
	}
}

// TestTeamsOutbox_PacesEachConversation: four tasks sent to a person at
// once are each posted once to the conversation, no two posts closer than
// the pace.
func TestTeamsOutbox_PacesEachConversation(t *testing.T) {
	const pace, n = 200 * time.Millisecond, 4
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			s.deliver(t, pace)
			for range n {
				s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`)
			}
			posts := s.fake.WaitPosted(t, n)
			for i := 1; i < len(posts); i++ {
				if gap := posts[i].At.Sub(posts[i-1].At); gap < pace {
					t.Errorf("posts %d and %d %v apart, want at least %v", i, i+1, gap, pace)
				}
			}
		})
	}
}

// TestTeamsOutbox_NotifyNamesTheChats: on an account with Slack and Teams,
// a task whose notify list names only a Teams conversation is posted
// there and not to Slack's channel, and one naming only a Slack channel
// is posted there and to no Teams conversation.
func TestTeamsOutbox_NotifyNamesTheChats(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			s.join(t, teamsRiskChannel, "Risk")
			if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.store.ConnectSlack(ctx, s.accountID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-1",
				SigningSecret: slackSecret, DefaultChannel: "#refunds"}, "T0FAKE", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			stop := s.deliver(t, time.Millisecond)
			toTeams := s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"notify":["teams:finance/risk"]}`)
			toSlack := s.routed(t, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"notify":["slack:#ops"]}`)
			if posts := s.fake.WaitPosted(t, 1); posts[0].Conversation != teamsRiskChannel || !strings.Contains(cardOf(t, posts[0]), toTeams.ID) {
				t.Errorf("posted %s to %s, want %s's card to %s", cardOf(t, posts[0]), posts[0].Conversation, toTeams.ID, teamsRiskChannel)
			}
			if left := s.unsent(t, stop); len(left) != 0 || len(s.fake.Posted()) != 1 {
				t.Errorf("%d Teams posts and %d left, want the one", len(s.fake.Posted()), len(left))
			}
			claimed, err := s.store.ClaimSlackMessages(ctx, "test", 100, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var slackPosts []string
			for _, dl := range claimed {
				if dl.Message.Kind == arbiter.SlackPost {
					slackPosts = append(slackPosts, dl.Message.TaskID+" to "+dl.Message.Channel)
				}
			}
			if len(slackPosts) != 1 || slackPosts[0] != toSlack.ID+" to #ops" {
				t.Errorf("Slack posts %v, want only %s to #ops", slackPosts, toSlack.ID)
			}
		})
	}
}

// teamsRecords is a store whose records of Teams attempts
// dbtest.LostRecords fails.
type teamsRecords struct {
	*db.DB
	*dbtest.LostRecords
}

func (s teamsRecords) RecordTeamsAttempt(ctx context.Context, owner, id string, step arbiter.DeliveryStep, r arbiter.TeamsResult) (err error) {
	if s.Record(func() error {
		err = s.DB.RecordTeamsAttempt(ctx, owner, id, step, r)
		return err
	}) {
		return dbtest.ErrUnreachable
	}
	return err
}

// TestTeamsOutbox_RecordsAgainWhileTheStoreIsUnreachable: a card whose
// record found the store unreachable (a failover) is recorded once the
// store answers again, or, made with its answer lost, is sent again and
// changes nothing: Teams holds the card once, and the decision updates
// that one card, which it can only when the post's record holds where it
// went. The record used to be given up: the message stayed leased, to be
// posted again when the lease ran out, and the conversation's turn held
// until then.
func TestTeamsOutbox_RecordsAgainWhileTheStoreIsUnreachable(t *testing.T) {
	for _, c := range dbtest.RecordLosses {
		for _, dialect := range dbtest.Dialects {
			t.Run(c.Name+"/"+dialect, func(t *testing.T) {
				s := newTeamsSite(t, dialect)
				s.join(t, teamsChannel, "Approvals")
				if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
					t.Fatal(err)
				}
				records := c.Records()
				// A record given up would wait for the hour's lease.
				s.deliverWith(t, worker.TeamsConfig{Store: teamsRecords{DB: s.store, LostRecords: records}, Pace: time.Millisecond, Lease: time.Hour})
				task := s.routed(t, `{"prompt":"Refund order 1234?","allowed_verdicts":["approve","reject"]}`)
				post := s.fake.WaitPosted(t, 1)[0]
				for deadline := time.Now().Add(30 * time.Second); len(records.Answers()) < c.Reached(); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d records reached the store, want %d", len(records.Answers()), c.Reached())
					}
				}
				c.Check(t, records)

				if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
					t.Fatal(err)
				}
				update := s.fake.WaitUpdates(t, 1)[0]
				if posts := s.fake.Posted(); len(posts) != 1 || update.ActivityID != post.ActivityID {
					t.Errorf("%d cards posted, the update to %q; want the one card %q, updated", len(posts), update.ActivityID, post.ActivityID)
				}
			})
		}
	}
}
