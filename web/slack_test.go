package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/web"
)

const slackSecret = "8f742231b10e8888abcd990123456789ab"

// slackSite is a server whose account owner@example.com is connected to
// the fake Slack in HTTP mode.
type slackSite struct {
	store     *db.DB
	url       string
	fake      *slackfake.Fake
	in        *slack.Interactions
	accountID string
	// storeURL and opts open the store again, as a restarted process.
	storeURL string
	opts     db.Options
}

func newSlackSite(t *testing.T, dialect string, opts db.Options) *slackSite {
	t.Helper()
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	opts.Secrets = k
	storeURL := dbtest.URL(t, dialect)
	store := dbtest.OpenURL(t, storeURL, opts)
	fake := slackfake.New(t)
	acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.FindOrCreateAccountByEmail(ctx, "other@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-1",
		SigningSecret: slackSecret, DefaultChannel: "#refunds"}, "T0FAKE", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		t.Fatal(err)
	}
	fake.AddUser(slackfake.User{ID: "UOWNER", Email: "Owner@Example.com", EmailConfirmed: true})
	fake.AddUser(slackfake.User{ID: "UOTHER", Email: "other@example.com", EmailConfirmed: true})
	fake.AddUser(slackfake.User{ID: "UNOBODY", Email: "nobody@example.com", EmailConfirmed: true})
	fake.AddUser(slackfake.User{ID: "UUNCONFIRMED", Email: "owner@example.com", EmailConfirmed: false})
	s := &slackSite{store: store, fake: fake, accountID: acct.ID, storeURL: storeURL, opts: opts}
	s.serve(t)
	s.linkSlackUser(t, "UOWNER", "owner@example.com", s.person(t, "owner@example.com"))
	return s
}

// person returns the person who signs in with email, signing them in by
// e-mail once.
func (s *slackSite) person(t *testing.T, email string) *arbiter.Person {
	t.Helper()
	p, err := s.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email,
		Email: email, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// linkSlackUser links the Slack user, whose confirmed address is email,
// to the person, as the person's visit to the link page would.
func (s *slackSite) linkSlackUser(t *testing.T, userID, email string, p *arbiter.Person) {
	t.Helper()
	token, err := s.store.OfferChatLink(ctx, s.accountID, arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: "T0FAKE",
		UserID: userID, Email: email})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.LinkChatUser(ctx, token, arbiter.Actor{Email: p.Email, PersonID: p.ID}); err != nil {
		t.Fatal(err)
	}
}

// serve starts the site's server over its store.
func (s *slackSite) serve(t *testing.T) {
	t.Helper()
	s.in = &slack.Interactions{Store: s.store, Slack: slack.NewClient(s.fake.URL, nil), Logger: discardLogger(),
		LinkURL: func(token string) string { return "https://review.example.com/review/chat-links/" + token }}
	rt := &web.Router{Services: web.Services{Tasks: s.store, Keys: s.store, Demo: s.store, Health: s.store, Queue: s.store},
		KeyChecker: web.NewKeyChecker(s.store, nil), Logger: discardLogger(), Slack: s.in}
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	rt.Site = handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL}
	srv.Config.Handler = rt.Routes()
	t.Cleanup(s.in.Wait)
	s.url = srv.URL
}

// restarted returns the site as a new process serves it: a new server,
// on the same data and Slack.
func (s *slackSite) restarted(t *testing.T) *slackSite {
	t.Helper()
	again := *s
	again.store = dbtest.OpenURL(t, s.storeURL, s.opts)
	again.serve(t)
	return &again
}

// click is the body Slack posts when user clicks the verdict's button.
func (s *slackSite) click(user, taskID, verdict string) []byte {
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "team": map[string]any{"id": "T0FAKE"}, "user": map[string]any{"id": user},
		"response_url": s.fake.ResponseURL, "trigger_id": "trig",
		"actions": []map[string]any{{"type": "button", "block_id": "decide", "action_id": slack.ActionDecide + "_0",
			"value": slack.EncodeValue(taskID, "", verdict)}},
	})
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

// post sends body to the interactions URL signed with secret at ts, or
// as given when header is set, and returns the status.
func (s *slackSite) post(t *testing.T, body []byte, header http.Header) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/integrations/slack/interactions", strings.NewReader(string(body)))
	req.Header = header
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// responses returns the texts answered to clicks so far.
func (s *slackSite) responses(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for _, c := range s.fake.WaitCalls(t, "response", n) {
		var m struct {
			Text         string `json:"text"`
			ResponseType string `json:"response_type"`
		}
		json.Unmarshal([]byte(c.Body), &m)
		if m.ResponseType != "ephemeral" {
			t.Errorf("answered %q not ephemerally", m.Text)
		}
		out = append(out, m.Text)
	}
	return out
}

func (s *slackSite) humanAttempts(t *testing.T, taskID string) []arbiter.Attempt {
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

// TestSlackInteractions_HTTP: a signed click decides once, as the member
// Slack's confirmed address names, via Slack in the audit log; a bad
// signature, a stale timestamp and a replay are 401 and change nothing;
// a person outside the account, a member of another account and an
// unconfirmed address are refused ephemerally; the same click delivered
// three times decides once and the later ones hear the outcome.
func TestSlackInteractions_HTTP(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			task := humanTask(t, s.store, "owner@example.com", "Refund?", "")
			now := time.Now()

			for name, c := range map[string]struct {
				body   []byte
				header http.Header
			}{
				"BadSignature":   {s.click("UOWNER", task.ID, "approve"), slackfake.Signed(s.click("UOWNER", task.ID, "approve"), "0000000000000000", now)},
				"StaleTimestamp": {s.click("UOWNER", task.ID, "approve"), slackfake.Signed(s.click("UOWNER", task.ID, "approve"), slackSecret, now.Add(-6*time.Minute))},
				"Unsigned":       {s.click("UOWNER", task.ID, "approve"), http.Header{}},
				"NotAPayload":    {[]byte("payload=nope"), slackfake.Signed([]byte("payload=nope"), slackSecret, now)},
			} {
				if got := s.post(t, c.body, c.header); got != http.StatusUnauthorized {
					t.Errorf("%s: %d, want 401", name, got)
				}
			}

			for i, user := range []string{"UNOBODY", "UOTHER", "UUNCONFIRMED"} {
				body := s.click(user, task.ID, "approve")
				if got := s.post(t, body, slackfake.Signed(body, slackSecret, now)); got != http.StatusOK {
					t.Fatalf("%s: %d", user, got)
				}
				if got := s.responses(t, i+1)[i]; got != slack.RefusalText {
					t.Errorf("%s was answered %q, want the refusal", user, got)
				}
			}
			if n := len(s.humanAttempts(t, task.ID)); n != 0 {
				t.Fatalf("refused clicks recorded %d attempts", n)
			}

			first := s.click("UOWNER", task.ID, "approve")
			header := slackfake.Signed(first, slackSecret, now)
			if got := s.post(t, first, header); got != http.StatusOK {
				t.Fatalf("a signed click: %d", got)
			}
			if got := s.responses(t, 4)[3]; got != "You decided “approve”." {
				t.Errorf("the decider was answered %q", got)
			}
			if got := s.post(t, first, header.Clone()); got != http.StatusUnauthorized {
				t.Errorf("a replay: %d, want 401", got)
			}
			// Slack delivers the same click again, signed anew, twice.
			for i := 1; i <= 2; i++ {
				if got := s.post(t, first, slackfake.Signed(first, slackSecret, now.Add(time.Duration(i)*time.Second))); got != http.StatusOK {
					t.Fatalf("redelivery %d: %d", i, got)
				}
			}
			answers := s.responses(t, 6)
			for _, a := range answers[4:] {
				if !strings.HasPrefix(a, "This task already ended: ✅ approve — owner@example.com") {
					t.Errorf("a redelivery was answered %q, want the outcome", a)
				}
			}
			attempts := s.humanAttempts(t, task.ID)
			if len(attempts) != 1 || *attempts[0].Verdict != "approve" || *attempts[0].Reviewer != "owner@example.com" {
				t.Fatalf("human attempts %+v, want one approve by owner@example.com", attempts)
			}
			events, err := s.store.ListAuditEvents(ctx, s.accountID, 20)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range events {
				found = found || (e.Kind == arbiter.AuditReviewDecided && strings.HasSuffix(e.Detail, "via Slack") && e.Actor == "owner@example.com")
			}
			if !found {
				t.Errorf("no audit line of the decision via Slack: %+v", events)
			}
		})
	}
}

// TestSlackInteractions_AckBeforeWork: the click is acknowledged while
// the work it starts (finding the member) is still held, and decides
// after.
func TestSlackInteractions_AckBeforeWork(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			task := humanTask(t, s.store, "owner@example.com", "Refund?", "")
			held := &countingStore{Store: s.store, hold: make(chan struct{})}
			s.in.Store = held
			var once sync.Once
			release := func() { once.Do(func() { close(held.hold) }) }
			defer release()
			body := s.click("UOWNER", task.ID, "reject")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			if n := len(s.humanAttempts(t, task.ID)); n != 0 {
				t.Fatal("decided before the ack")
			}
			release()
			if got := s.responses(t, 1)[0]; got != "You decided “reject”." {
				t.Errorf("answered %q", got)
			}
		})
	}
}

// TestSlackInteractions_AfterTheDeadline: a click on a task that expired
// changes nothing and answers the outcome.
func TestSlackInteractions_AfterTheDeadline(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			task, err := s.store.CreateTask(ctx, s.accountID, arbiter.TaskCreate{Prompt: "Late?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.5, TaskType: "refund", Touchpoint: "chat", DeadlineSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				ids, err := s.store.ExpireTasks(ctx, 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(ids) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the task never expired")
				}
				time.Sleep(50 * time.Millisecond)
			}
			body := s.click("UOWNER", task.ID, "approve")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			if got := s.responses(t, 1)[0]; !strings.HasPrefix(got, "This task already ended: ⌛ Expired") {
				t.Errorf("answered %q, want the outcome", got)
			}
			if n := len(s.humanAttempts(t, task.ID)); n != 0 {
				t.Errorf("a click after the deadline recorded %d attempts", n)
			}
		})
	}
}

// TestTaskCreate_Notify: the API takes a task's own Slack channels, and
// refuses a malformed notify list with a 400 naming the field.
func TestTaskCreate_Notify(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("notify@example.com")
		createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["a","b"],"notify":["slack:#refunds"]}`)
		for _, bad := range []string{`["slack:refunds"]`, `[]`, `["mail:x@example.com"]`, `"slack:#a"`} {
			status, header, body := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a","b"],"notify":`+bad+`}`)
			if msg := wantError(t, status, header, body, http.StatusBadRequest); !strings.Contains(msg, "notify") {
				t.Errorf("notify %s: %q does not name the field", bad, msg)
			}
		}
	})
}

// TestSlackInteractions_VoteRecorded: a click on a task that asks two
// votes records the vote and says so, not that the clicker decided; the
// second voter's click decides it.
func TestSlackInteractions_VoteRecorded(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			s.linkSlackUser(t, "UOTHER", "other@example.com", s.addMember(t, "other@example.com", arbiter.RoleReviewer))
			in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"Release?","allowed_verdicts":["approve","reject"],"reviews_required":2}`))
			if err != nil {
				t.Fatal(err)
			}
			task := s.routedTask(t, in)
			body := s.click("UOWNER", task.ID, "approve")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			if got := s.responses(t, 1)[0]; got != "Your vote, “approve”, is recorded; the task is decided when enough reviewers have voted." {
				t.Errorf("the first voter was answered %q", got)
			}
			if now, err := s.store.FindTaskByID(ctx, s.accountID, task.ID); err != nil || now.Status != arbiter.StatusHumanNeeded {
				t.Fatalf("after one vote of two: %v, %v", now.Status, err)
			}
			body = s.click("UOTHER", task.ID, "approve")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			if got := s.responses(t, 2)[1]; got != "You decided “approve”." {
				t.Errorf("the deciding voter was answered %q", got)
			}
		})
	}
}

// addMember makes email a member of the site's account with role, signed
// in once (by e-mail, so its address is verified).
func (s *slackSite) addMember(t *testing.T, email, role string) *arbiter.Person {
	t.Helper()
	owner := s.person(t, "owner@example.com")
	_, token, err := s.store.CreateInvitation(ctx, s.accountID, email, role, arbiter.Actor{Email: owner.Email, PersonID: owner.ID})
	if err != nil {
		t.Fatal(err)
	}
	p := s.person(t, email)
	if _, err := s.store.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// routedTask creates in in the site's account and sends it to a person.
func (s *slackSite) routedTask(t *testing.T, in arbiter.TaskCreate) *arbiter.Task {
	t.Helper()
	task, err := s.store.CreateTask(ctx, s.accountID, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.ClaimTasks(ctx, "wrk_test", 100, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.store.FinishAgentAttempt(ctx, "wrk_test", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent},
		Next: arbiter.StatusHumanNeeded}); err != nil {
		t.Fatal(err)
	}
	return task
}

// TestSlackInteractions_ReplayRefusedAfterARestart: a signed click
// replayed to a restarted server, or to another server over the same
// store, is refused like one replayed to the server that took it: the
// signatures seen are kept in the store.
func TestSlackInteractions_ReplayRefusedAfterARestart(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			task := humanTask(t, s.store, "owner@example.com", "Refund?", "")
			body := s.click("UOWNER", task.ID, "approve")
			header := slackfake.Signed(body, slackSecret, time.Now())
			if got := s.post(t, body, header.Clone()); got != http.StatusOK {
				t.Fatalf("the click: %d", got)
			}
			s.responses(t, 1)
			again := s.restarted(t)
			if got := again.post(t, body, header.Clone()); got != http.StatusUnauthorized {
				t.Errorf("the click replayed after a restart: %d, want 401", got)
			}
			fresh := slackfake.Signed(body, slackSecret, time.Now().Add(time.Second))
			if got := again.post(t, body, fresh); got != http.StatusOK {
				t.Errorf("a new delivery after the restart: %d, want 200", got)
			}
		})
	}
}

// TestSlackInteractions_OneActionAPayload: a signed payload listing
// twenty decisions, of twenty tasks, does the first only: one lookup of
// the clicker, one decision, one answer.
func TestSlackInteractions_OneActionAPayload(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			var actions []map[string]any
			var ids []string
			for i := range 20 {
				task := humanTask(t, s.store, "owner@example.com", fmt.Sprintf("Refund %d?", i), "")
				ids = append(ids, task.ID)
				actions = append(actions, map[string]any{"type": "button", "block_id": "decide",
					"action_id": slack.ActionDecide + "_0", "value": slack.EncodeValue(task.ID, "", "approve")})
			}
			counted := &countingStore{Store: s.store}
			s.in.Store = counted
			payload, _ := json.Marshal(map[string]any{"type": "block_actions", "team": map[string]any{"id": "T0FAKE"},
				"user": map[string]any{"id": "UOWNER"}, "response_url": s.fake.ResponseURL, "actions": actions})
			body := []byte(url.Values{"payload": {string(payload)}}.Encode())
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			s.in.Wait()
			decided := 0
			for _, id := range ids {
				decided += len(s.humanAttempts(t, id))
			}
			if decided != 1 || len(s.humanAttempts(t, ids[0])) != 1 {
				t.Errorf("%d tasks decided, want the first only", decided)
			}
			if counted.members != 1 {
				t.Errorf("the clicker looked up %d times, want once", counted.members)
			}
			if n := len(s.fake.Calls("response")); n != 1 {
				t.Errorf("%d answers, want one", n)
			}
		})
	}
}

// TestSlackInteractions_BoundsClicksInFlight: while the clicks being
// handled hold every slot (Slack slow to answer users.info), a further
// signed click is answered 429 with Retry-After, not given a goroutine;
// once they end, the held ones are answered.
func TestSlackInteractions_BoundsClicksInFlight(t *testing.T) {
	const slots = slack.DefaultMaxInFlight
	s := newSlackSite(t, db.SQLite, db.Options{})
	task := humanTask(t, s.store, "owner@example.com", "Refund?", "")
	release := s.fake.Hold("users.info")
	defer release()
	now := time.Now()
	statuses := map[int]int{}
	for i := range slots + 3 {
		body := s.click("UNOBODY", task.ID, "approve")
		req, _ := http.NewRequest(http.MethodPost, s.url+"/integrations/slack/interactions", strings.NewReader(string(body)))
		req.Header = slackfake.Signed(body, slackSecret, now.Add(time.Duration(i)*time.Second))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Error("a 429 without Retry-After")
		}
	}
	if statuses[http.StatusOK] != slots || statuses[http.StatusTooManyRequests] != 3 {
		t.Errorf("answers %v, want %d × 200 and 3 × 429", statuses, slots)
	}
	release()
	if got := len(s.responses(t, slots)); got != slots {
		t.Errorf("%d clicks answered, want %d", got, slots)
	}
}

// countingStore counts the lookups of Slack connections and of members
// behind Slack users; the latter wait for hold, when set, to close.
type countingStore struct {
	slack.Store
	hold    chan struct{}
	mu      sync.Mutex
	lookups int
	members int
}

func (c *countingStore) FindChatMember(ctx context.Context, accountID string, u arbiter.ChatUser) (*arbiter.Membership, error) {
	if c.hold != nil {
		<-c.hold
	}
	c.mu.Lock()
	c.members++
	c.mu.Unlock()
	return c.Store.FindChatMember(ctx, accountID, u)
}

func (c *countingStore) ListSlackConnections(ctx context.Context, mode, teamID string) ([]*arbiter.SlackConnection, error) {
	c.mu.Lock()
	c.lookups++
	c.mu.Unlock()
	return c.Store.ListSlackConnections(ctx, mode, teamID)
}

// TestSlackInteractions_BoundsFailedSignatures: requests naming a
// connected workspace whose signatures fail are refused 401; past ten
// from one client they are refused 429 with Retry-After, before any
// lookup or MAC; a request whose timestamp is out of the window is
// refused before any lookup too.
func TestSlackInteractions_BoundsFailedSignatures(t *testing.T) {
	s := newSlackSite(t, db.SQLite, db.Options{})
	counted := &countingStore{Store: s.store}
	s.in.Store = counted
	task := humanTask(t, s.store, "owner@example.com", "Refund?", "")
	body := s.click("UOWNER", task.ID, "approve")
	stale := slackfake.Signed(body, slackSecret, time.Now().Add(-time.Hour))
	if got := s.post(t, body, stale); got != http.StatusUnauthorized || counted.lookups != 0 {
		t.Errorf("a stale request: %d after %d lookups, want 401 before any", got, counted.lookups)
	}
	for i := range 10 {
		if got := s.post(t, body, slackfake.Signed(body, "00000000000000000000", time.Now())); got != http.StatusUnauthorized {
			t.Fatalf("bad signature %d: %d, want 401", i, got)
		}
	}
	before := counted.lookups
	req, _ := http.NewRequest(http.MethodPost, s.url+"/integrations/slack/interactions", strings.NewReader(string(body)))
	req.Header = slackfake.Signed(body, "00000000000000000000", time.Now())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the eleventh bad signature: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if counted.lookups != before {
		t.Errorf("the refused request looked the workspace up")
	}
	if n := len(s.humanAttempts(t, task.ID)); n != 0 {
		t.Errorf("%d attempts recorded", n)
	}
}

var chatLinkInText = regexp.MustCompile(`/review/chat-links/([0-9a-f]{64})\|`)

// TestSlackInteractions_LinkBeforeDeciding: the first click of a Slack
// user whose confirmed address is a member's decides nothing and answers
// a link, to the clicker only, naming the address to sign in with; the
// link links the user to that member only, once; then the user's click
// decides as them.
func TestSlackInteractions_LinkBeforeDeciding(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			ann := s.addMember(t, "ann@example.com", arbiter.RoleReviewer)
			owner := s.person(t, "owner@example.com")
			s.fake.AddUser(slackfake.User{ID: "UANN", Email: "ann@example.com", EmailConfirmed: true})
			task := humanTask(t, s.store, "owner@example.com", "Refund?", "")
			body := s.click("UANN", task.ID, "approve")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			answer := s.responses(t, 1)[0]
			m := chatLinkInText.FindStringSubmatch(answer)
			if m == nil || !strings.Contains(answer, "sign in as ann@example.com") {
				t.Fatalf("the first click was answered %q, want a link naming ann@example.com", answer)
			}
			if n := len(s.humanAttempts(t, task.ID)); n != 0 {
				t.Fatalf("an unlinked click recorded %d attempts", n)
			}
			if _, err := s.store.LinkChatUser(ctx, m[1], arbiter.Actor{Email: owner.Email, PersonID: owner.ID}); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
				t.Errorf("another member used the link: %v", err)
			}
			if _, err := s.store.LinkChatUser(ctx, m[1], arbiter.Actor{Email: ann.Email, PersonID: ann.ID}); err != nil {
				t.Fatalf("ann's link: %v", err)
			}
			if _, err := s.store.LinkChatUser(ctx, m[1], arbiter.Actor{Email: ann.Email, PersonID: ann.ID}); !errors.Is(err, arbiter.ErrChatLinkInvalid) {
				t.Errorf("the link used again: %v", err)
			}
			body = s.click("UANN", task.ID, "approve")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now().Add(time.Second))); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			if got := s.responses(t, 2)[1]; got != "You decided “approve”." {
				t.Errorf("the linked click was answered %q", got)
			}
			if a := s.humanAttempts(t, task.ID); len(a) != 1 || *a[0].Reviewer != "ann@example.com" {
				t.Errorf("attempts %+v, want one by ann@example.com", a)
			}
		})
	}
}

// TestSlackInteractions_OnePersonCannotMeetTwoVotes: an owner who
// controls the connected workspace votes on the desk, then gives a Slack
// user of theirs another member's address and clicks as it: the click
// is not a second vote (it is offered a link that only that member can
// use), so the task still waits for a second person.
func TestSlackInteractions_OnePersonCannotMeetTwoVotes(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			s.addMember(t, "ann@example.com", arbiter.RoleReviewer)
			owner := s.person(t, "owner@example.com")
			// The workspace's admin confirms any address they like.
			s.fake.AddUser(slackfake.User{ID: "UFAKEANN", Email: "ann@example.com", EmailConfirmed: true})
			in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"Wire 90,000 EUR?","allowed_verdicts":["approve","reject"],"reviews_required":2}`))
			if err != nil {
				t.Fatal(err)
			}
			task := s.routedTask(t, in)
			if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "approve",
				Reviewer: owner.Email, ReviewerID: owner.ID}); err != nil {
				t.Fatal(err)
			}
			body := s.click("UFAKEANN", task.ID, "approve")
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("%d", got)
			}
			answer := s.responses(t, 1)[0]
			if m := chatLinkInText.FindStringSubmatch(answer); m != nil {
				if _, err := s.store.LinkChatUser(ctx, m[1], arbiter.Actor{Email: owner.Email, PersonID: owner.ID}); err == nil {
					t.Error("the owner linked a Slack user to another member's address")
				}
			}
			now, err := s.store.FindTaskByID(ctx, s.accountID, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if now.Status != arbiter.StatusHumanNeeded || len(s.humanAttempts(t, task.ID)) != 1 {
				t.Errorf("after the owner's vote and a click as ann@example.com: %s with %d votes, want one vote, waiting",
					now.Status, len(s.humanAttempts(t, task.ID)))
			}
		})
	}
}
