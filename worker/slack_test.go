package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/worker"
)

// slackStore opens a store that seals secrets, with an account connected
// to the fake Slack's #refunds, and returns the account.
func slackStore(t *testing.T, dialect string) (*db.DB, string) {
	t.Helper()
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	store := dbtest.Open(t, dialect, db.Options{Secrets: k})
	acct, err := store.FindOrCreateAccountByEmail(ctx, "slack@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP,
		BotToken: "xoxb-test", SigningSecret: "0123456789abcdef0123", DefaultChannel: "#refunds"}, "T0FAKE",
		arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		t.Fatal(err)
	}
	return store, acct.ID
}

func startSlack(t *testing.T, store *db.DB, fake *slackfake.Fake, pace time.Duration) {
	t.Helper()
	startSlackWith(t, store, fake, worker.SlackConfig{Pace: pace})
}

// startSlackWith runs a deliverer of cfg (its store, unless cfg has one,
// and its client, desk and poll set here) until the test ends, or until
// the stop it returns is called.
func startSlackWith(t *testing.T, store *db.DB, fake *slackfake.Fake, cfg worker.SlackConfig) (stop func()) {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = store
	}
	cfg.Slack, cfg.Poll = slack.NewClient(fake.URL, nil), 20*time.Millisecond
	cfg.DeskURL = func(id string) string { return "http://review.test/review/tasks/" + id }
	d := worker.NewSlackDeliverer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func newSlackTask(t *testing.T, store *db.DB, accountID string, in arbiter.TaskCreate) string {
	t.Helper()
	if in.Prompt == "" {
		in = arbiter.TaskCreate{Prompt: "Refund order 1234?", AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8,
			TaskType: "decide", Touchpoint: "chat", Context: []byte(`{"customer":"Ann <ann@example.com>","amount":12}`)}
	}
	task, err := store.CreateTask(ctx, accountID, in)
	if err != nil {
		t.Fatal(err)
	}
	return task.ID
}

// blocksOf returns a post's or update's blocks as the JSON Slack got.
func blocksOf(t *testing.T, c slackfake.Call) string {
	t.Helper()
	b := c.Form.Get("blocks")
	if !json.Valid([]byte(b)) {
		t.Fatalf("%s sent blocks that are not JSON: %q", c.Method, b)
	}
	// Go's encoder writes &, < and > as escapes; the tests read them plain.
	return strings.NewReplacer(`\u0026`, "&", `\u003c`, "<", `\u003e`, ">").Replace(b)
}

// TestSlackDeliverer_PostsThenUpdatesEveryCopy: a task sent to a person
// posts one message to the account's channel, with the prompt, the
// context's fields, the verifier's verdict and confidence and one button
// per verdict whose value is the task and the verdict (no URL decides);
// a decision on the desk updates that message to the outcome, without
// buttons.
func TestSlackDeliverer_PostsThenUpdatesEveryCopy(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{})
			agentStep(t, store, taskID, arbiter.StatusHumanNeeded)

			posts := fake.WaitCalls(t, "chat.postMessage", 1)
			post := posts[0]
			if got := post.Form.Get("channel"); got != "#refunds" {
				t.Errorf("posted to %q, want #refunds", got)
			}
			var blocks []map[string]any
			if err := json.Unmarshal([]byte(blocksOf(t, post)), &blocks); err != nil {
				t.Fatal(err)
			}
			raw := blocksOf(t, post)
			for _, want := range []string{"Refund order 1234?", "*customer*", "Ann &lt;ann@example.com&gt;", "*amount*",
				"Verifier: *approve* at 0.10 confidence", `"value":"` + taskID + `|approve"`, `"value":"` + taskID + `|reject"`,
				"Open in the desk"} {
				if !strings.Contains(raw, want) {
					t.Errorf("the post lacks %q:\n%s", want, raw)
				}
			}
			buttons := 0
			for _, b := range blocks {
				if b["type"] != "actions" {
					continue
				}
				for _, el := range b["elements"].([]any) {
					e := el.(map[string]any)
					if strings.HasPrefix(e["action_id"].(string), slack.ActionDecide) {
						buttons++
						if _, hasURL := e["url"]; hasURL {
							t.Errorf("a decision button carries a URL: %v", e)
						}
					}
				}
			}
			if buttons != 2 {
				t.Errorf("%d decision buttons, want one per verdict (2)", buttons)
			}

			if _, err := store.DecideTask(ctx, accountID, taskID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			update := fake.WaitCalls(t, "chat.update", 1)[0]
			if update.Form.Get("channel") != slackfake.ChannelID("#refunds") || update.Form.Get("ts") != fake.Messages(slackfake.ChannelID("#refunds"))[0].TS {
				t.Errorf("updated %q at %q, want the post's channel id and ts", update.Form.Get("channel"), update.Form.Get("ts"))
			}
			raw = blocksOf(t, update)
			if !strings.Contains(raw, "✅ reject — r@example.com") || strings.Contains(raw, `"actions"`) {
				t.Errorf("the update does not show the outcome without buttons:\n%s", raw)
			}
			if n := len(fake.Calls("chat.postMessage")); n != 1 {
				t.Errorf("%d posts, want 1", n)
			}
		})
	}
}

// TestSlackDeliverer_BlindAuditShowsNoVerdict: a task the verifier
// completed and that waits for a blind audit is posted without the
// verifier's verdict or confidence.
func TestSlackDeliverer_BlindAuditShowsNoVerdict(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			if err := store.SetAuditRate(ctx, accountID, 1); err != nil {
				t.Fatal(err)
			}
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{Prompt: "Ship it?", AllowedVerdicts: []string{"yes", "no"},
				ConfidenceThreshold: 0.5, TaskType: "decide", Touchpoint: "chat"})
			agentStepVerdict(t, store, taskID, "yes", 0.93)
			raw := blocksOf(t, fake.WaitCalls(t, "chat.postMessage", 1)[0])
			if !strings.Contains(raw, "Blind audit") {
				t.Errorf("the audit's post does not say it is blind:\n%s", raw)
			}
			var blocks []map[string]any
			json.Unmarshal([]byte(raw), &blocks)
			for _, b := range blocks {
				if b["type"] == "actions" {
					continue // the buttons name every verdict, as the desk does
				}
				s, _ := json.Marshal(b)
				for _, leak := range []string{"yes", "0.93", "confidence", "Verifier"} {
					if strings.Contains(string(s), leak) {
						t.Errorf("a blind audit's block shows %q: %s", leak, s)
					}
				}
			}
		})
	}
}

// agentStepVerdict completes the task by the agent with verdict at
// confidence, as the task worker would.
func agentStepVerdict(t *testing.T, store *db.DB, taskID, verdict string, confidence float64) {
	t.Helper()
	if _, err := store.ClaimTasks(ctx, "wrk_test", 100, time.Minute); err != nil {
		t.Fatal(err)
	}
	defer store.ReleaseTasks(ctx, "wrk_test")
	now := arbiter.TimestampOf(time.Now())
	a := arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence, StartedAt: now, FinishedAt: &now}
	if err := store.FinishAgentAttempt(ctx, "wrk_test", taskID, arbiter.AgentStep{Attempt: a, Next: arbiter.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
}

// TestSlackDeliverer_HonoursRetryAfter: a post answered 429 with
// Retry-After: 1 is sent again no sooner than a second later, once.
func TestSlackDeliverer_HonoursRetryAfter(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			fake.RateLimit("chat.postMessage", time.Second)
			startSlack(t, store, fake, 0)
			taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{})
			agentStep(t, store, taskID, arbiter.StatusHumanNeeded)
			ok := fake.WaitCalls(t, "chat.postMessage", 1)
			all := fake.Calls("chat.postMessage")
			if len(all) != 2 || all[0].Status != 429 || len(ok) != 1 {
				t.Fatalf("calls %+v, want one 429 then one post", all)
			}
			if gap := all[1].At.Sub(all[0].At); gap < time.Second {
				t.Errorf("retried %v after a 429 asking for 1s", gap)
			}
		})
	}
}

// TestSlackDeliverer_PacesEachChannel: six tasks sent to a person at once
// are each posted once, and no two posts to the channel are closer than
// the pace.
func TestSlackDeliverer_PacesEachChannel(t *testing.T) {
	const pace, n = 150 * time.Millisecond, 6
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			ids := map[string]bool{}
			for range n {
				ids[newSlackTask(t, store, accountID, arbiter.TaskCreate{})] = true
			}
			claimed, err := store.ClaimTasks(ctx, "wrk_test", n, time.Minute)
			if err != nil || len(claimed) != n {
				t.Fatalf("claim: %v, %d", err, len(claimed))
			}
			for _, task := range claimed {
				v, c := "approve", 0.1
				now := arbiter.TimestampOf(time.Now())
				if err := store.FinishAgentAttempt(ctx, "wrk_test", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
					Verdict: &v, Confidence: &c, StartedAt: now, FinishedAt: &now}, Next: arbiter.StatusHumanNeeded}); err != nil {
					t.Fatal(err)
				}
			}
			startSlack(t, store, fake, pace)
			posts := fake.WaitCalls(t, "chat.postMessage", n)
			for i := 1; i < len(posts); i++ {
				if gap := posts[i].At.Sub(posts[i-1].At); gap < pace-2*time.Millisecond {
					t.Errorf("posts %d and %d to one channel %v apart, want at least %v", i-1, i, gap, pace)
				}
			}
			seen := map[string]bool{}
			for _, p := range posts {
				raw := blocksOf(t, p)
				for id := range ids {
					if strings.Contains(raw, `"value":"`+id+`|approve"`) {
						if seen[id] {
							t.Errorf("task %s posted twice", id)
						}
						seen[id] = true
					}
				}
			}
			if len(seen) != n {
				t.Errorf("%d of %d tasks posted", len(seen), n)
			}
		})
	}
}

// TestSlackDeliverer_PacesAChannelUnderConcurrency: with eight messages in
// flight at once, eight tasks sent to a person at once, all to one
// channel, are each posted once, and no two posts are closer than the
// pace: a channel's turn is taken before its call, not after.
func TestSlackDeliverer_PacesAChannelUnderConcurrency(t *testing.T) {
	const pace, n = 100 * time.Millisecond, 8
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			var ids []string
			for range n {
				ids = append(ids, newSlackTask(t, store, accountID, arbiter.TaskCreate{}))
			}
			claimed, err := store.ClaimTasks(ctx, "wrk_test", n, time.Minute)
			if err != nil || len(claimed) != n {
				t.Fatalf("claim: %v, %d", err, len(claimed))
			}
			for _, task := range claimed {
				v, c := "approve", 0.1
				now := arbiter.TimestampOf(time.Now())
				if err := store.FinishAgentAttempt(ctx, "wrk_test", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
					Verdict: &v, Confidence: &c, StartedAt: now, FinishedAt: &now}, Next: arbiter.StatusHumanNeeded}); err != nil {
					t.Fatal(err)
				}
			}
			startSlackWith(t, store, fake, worker.SlackConfig{Pace: pace, Concurrency: n})
			posts := fake.WaitCalls(t, "chat.postMessage", n)
			least := time.Hour
			for i := 1; i < len(posts); i++ {
				gap := posts[i].At.Sub(posts[i-1].At)
				if gap < pace {
					t.Errorf("posts %d and %d to one channel %v apart, want at least %v", i-1, i, gap, pace)
				}
				least = min(least, gap)
			}
			t.Logf("%d posts in %v, the closest two %v apart (pace %v)", n, posts[n-1].At.Sub(posts[0].At), least, pace)
			seen := map[string]int{}
			for _, p := range posts {
				raw := blocksOf(t, p)
				for _, id := range ids {
					if strings.Contains(raw, `"value":"`+id+`|approve"`) {
						seen[id]++
					}
				}
			}
			for _, id := range ids {
				if seen[id] != 1 {
					t.Errorf("task %s posted %d times, want once", id, seen[id])
				}
			}
		})
	}
}

// TestSlackDeliverer_ExpiryUpdatesTheCopy: a posted task that expires has
// its message updated to the outcome, without buttons.
func TestSlackDeliverer_ExpiryUpdatesTheCopy(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			task, err := store.CreateTask(ctx, accountID, arbiter.TaskCreate{Prompt: "Soon?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, TaskType: "decide", Touchpoint: "chat", DeadlineSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			agentStep(t, store, task.ID, arbiter.StatusHumanNeeded)
			fake.WaitCalls(t, "chat.postMessage", 1)
			deadline := time.Now().Add(30 * time.Second)
			for {
				ids, err := store.ExpireTasks(ctx, 10)
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
			raw := blocksOf(t, fake.WaitCalls(t, "chat.update", 1)[0])
			if !strings.Contains(raw, "⌛ Expired") || strings.Contains(raw, `"actions"`) {
				t.Errorf("the update after expiry:\n%s", raw)
			}
		})
	}
}

// TestSlackDeliverer_TaskNotifyOverridesTheChannel: a task created with
// its own notify list is posted to each of its channels, not to the
// account's, and a decision updates every copy.
func TestSlackDeliverer_TaskNotifyOverridesTheChannel(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"EU refund?","allowed_verdicts":["approve","reject"],
				"notify":["slack:#refunds-eu","slack:C0VIP0001"]}`))
			if err != nil {
				t.Fatal(err)
			}
			taskID := newSlackTask(t, store, accountID, in)
			agentStep(t, store, taskID, arbiter.StatusHumanNeeded)
			posts := fake.WaitCalls(t, "chat.postMessage", 2)
			channels := map[string]bool{}
			for _, p := range posts {
				channels[p.Form.Get("channel")] = true
			}
			if !channels["#refunds-eu"] || !channels["C0VIP0001"] || len(channels) != 2 {
				t.Fatalf("posted to %v, want the task's two channels only", channels)
			}
			if _, err := store.DecideTask(ctx, accountID, taskID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			updated := map[string]bool{}
			for _, u := range fake.WaitCalls(t, "chat.update", 2) {
				updated[u.Form.Get("channel")] = true
			}
			if !updated[slackfake.ChannelID("#refunds-eu")] || !updated["C0VIP0001"] {
				t.Errorf("updated %v, want both copies", updated)
			}
			if n := len(fake.Calls("chat.postMessage")); n != 2 {
				t.Errorf("%d posts, want 2", n)
			}
		})
	}
}

// TestSlackDeliverer_PolicyNotifyRoutesTheTask: a task whose policy names
// a Slack channel is posted to that channel, not the account's; a create
// that names its own channel is posted there instead.
func TestSlackDeliverer_PolicyNotifyRoutesTheTask(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			if _, err := store.PutPolicy(ctx, accountID, arbiter.Policy{TaskType: "refund", Notify: []string{"slack:#refunds-eu"}},
				arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			create := func(body string) string {
				in, err := arbiter.ParseTaskCreate([]byte(body))
				if err != nil {
					t.Fatal(err)
				}
				return newSlackTask(t, store, accountID, in)
			}
			routed := create(`{"prompt":"EU refund?","allowed_verdicts":["approve","reject"],"task_type":"refund"}`)
			agentStep(t, store, routed, arbiter.StatusHumanNeeded)
			post := fake.WaitCalls(t, "chat.postMessage", 1)[0]
			if got := post.Form.Get("channel"); got != "#refunds-eu" || !strings.Contains(blocksOf(t, post), routed) {
				t.Fatalf("the policy's task went to %q, want #refunds-eu", got)
			}
			own := create(`{"prompt":"VIP refund?","allowed_verdicts":["approve","reject"],"task_type":"refund","notify":["slack:C0VIP0001"]}`)
			agentStep(t, store, own, arbiter.StatusHumanNeeded)
			post = fake.WaitCalls(t, "chat.postMessage", 2)[1]
			if got := post.Form.Get("channel"); got != "C0VIP0001" || !strings.Contains(blocksOf(t, post), own) {
				t.Errorf("the create's own notify went to %q, want C0VIP0001", got)
			}
		})
	}
}
