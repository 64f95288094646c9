package web_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/worker"
)

// TestTrace_APersonsDecisionJoinsTheCreate exports by OTLP over HTTP to
// an in-process receiver, on both stores, while a task created over the
// API is left by an unsure verifier (the agent worker) to a person,
// posted to Slack (the fake), and decided by its reviewer on the desk: a
// real session signed in by the mailed link, the task's page read, and
// its decision form posted as the browser does (same-origin; the same
// post from another site is refused). The create's trace holds the agent
// decision, the verifier's call with its tokens, the Slack post (queued by
// the agent's record), the wait for a person
// (the create's child, from the routing to the decision) and the Slack
// update the decision queued; the desk's request is a trace of its own,
// with the store's decision under it, and the wait links to it.
//
// A second task, created under a caller's trace that is not sampled,
// goes the same way and leaves nothing: no agent decision, no delivery,
// no wait, not even in the desk's trace, whose request decided it.
func TestTrace_APersonsDecisionJoinsTheCreate(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			receiver, flush := testutil.TraceEverything(t)
			k, err := secretbox.Parse(secretbox.NewKey())
			if err != nil {
				t.Fatal(err)
			}
			d := newDashOn(t, dialect, db.Options{Secrets: k}, func(d *dash) { d.router.Tracing = true })
			acct, err := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
			if err != nil {
				t.Fatal(err)
			}
			fake := slackfake.New(t)
			if _, err := d.store.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-test",
				SigningSecret: slackSecret, DefaultChannel: "#refunds"}, "T0FAKE", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "test", arbiter.Actor{Email: "alice@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			logger := slog.New(slog.DiscardHandler)
			stopSlack := inBackground(t, worker.NewSlackDeliverer(worker.SlackConfig{Store: d.store, Slack: slack.NewClient(fake.URL, nil),
				Logger: logger, Pace: time.Millisecond, Poll: 20 * time.Millisecond,
				DeskURL: func(id string) string { return d.url + "/review/tasks/" + id }}).Run)
			unsure := verifierFunc(func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
				return arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.2, Model: "judge-1",
					Usage: arbiter.Usage{InputTokens: 812, OutputTokens: 9}}, nil
			})
			stopWorker := inBackground(t, worker.New(worker.Config{Queue: d.store, Verifier: unsure, Health: d.store, Logger: logger,
				Concurrency: 2, Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond, Grace: time.Second}).Run)

			alice := d.browser()
			alice.signIn("alice@example.com")
			// decide creates a task under the caller's traceparent, waits
			// for the agent to leave it to a person and for its Slack
			// post, and decides it on the desk.
			decide := func(traceparent, verdict string) string {
				t.Helper()
				req, _ := http.NewRequest("POST", d.url+"/v1/tasks", strings.NewReader(
					`{"prompt":"Refund order 1234?","allowed_verdicts":["approve","reject"],"confidence_threshold":0.8}`))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("traceparent", traceparent)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var task struct{ ID string }
				json.NewDecoder(res.Body).Decode(&task)
				res.Body.Close()
				if res.StatusCode != http.StatusOK || task.ID == "" {
					t.Fatalf("create = %d %+v", res.StatusCode, task)
				}
				posts := len(fake.Calls("chat.postMessage"))
				fake.WaitCalls(t, "chat.postMessage", posts+1)
				// The post is queued with the routing to a person.
				if routed, err := d.store.FindTaskByID(ctx, acct.ID, task.ID); err != nil || routed.Status != arbiter.StatusHumanNeeded {
					t.Fatalf("after its Slack post the task is %+v (%v)", routed, err)
				}
				page := alice.get("/review/tasks/" + task.ID)
				wantStatus(t, page, http.StatusOK)
				if !strings.Contains(page.body, `action="/review/tasks/`+task.ID+`"`) {
					t.Fatalf("the desk's page has no decision form:\n%.1500s", page.body)
				}
				form := url.Values{"verdict": {verdict}, "rationale": {"No receipt."}}
				wantStatus(t, alice.do("POST", "/review/tasks/"+task.ID, form, map[string]string{"Sec-Fetch-Site": "cross-site"}), http.StatusForbidden)
				wantStatus(t, alice.do("POST", "/review/tasks/"+task.ID, form, map[string]string{"Sec-Fetch-Site": "same-origin"}), http.StatusSeeOther)
				decided, err := d.store.FindTaskByID(ctx, acct.ID, task.ID)
				if err != nil || decided.Status != arbiter.StatusCompleted || *decided.FinalVerdict != verdict {
					t.Fatalf("after the desk's decision the task is %+v (%v)", decided, err)
				}
				return task.ID
			}
			const callerTrace, untracedTrace = "4bf92f3577b34da6a3ce929d0e0e4736", "5cf92f3577b34da6a3ce929d0e0e4737"
			taskID := decide("00-"+callerTrace+"-00f067aa0ba902b7-01", "reject")
			fake.WaitCalls(t, "chat.update", 1)
			untracedID := decide("00-"+untracedTrace+"-00f067aa0ba902b7-00", "approve")
			fake.WaitCalls(t, "chat.update", 2)
			stopWorker()
			stopSlack()
			flush()

			spans := receiver.Trace(callerTrace)
			one := func(spans []*tracev1.Span, name, key, value string) *tracev1.Span {
				t.Helper()
				found := testutil.Named(spans, name, key, value)
				if len(found) != 1 {
					t.Fatalf("the trace holds %d %q spans, want 1; it holds %v", len(found), name, testutil.SpanNames(spans))
				}
				return found[0]
			}
			create := one(spans, "POST /v1/tasks", "", "")
			agent := one(spans, "agent decision", "arbiter.task_id", taskID)
			verify := one(spans, "verifier call", "arbiter.task_id", taskID)
			finish := one(spans, "db FinishAgentAttempt", "", "")
			post := one(spans, "slack deliver", "arbiter.message.kind", arbiter.SlackPost)
			wait := one(spans, "wait for a person", "arbiter.task_id", taskID)
			// An update may wait for the channel's turn first: its
			// attempts are spans of their own.
			var update *tracev1.Span
			for _, s := range testutil.Named(spans, "slack deliver", "arbiter.message.kind", arbiter.SlackUpdate) {
				if testutil.SpanAttrs(s)["arbiter.delivery.outcome"] == "sent" {
					update = s
				}
			}
			if update == nil {
				t.Fatalf("the create's trace holds no sent Slack update: %v", testutil.SpanNames(spans))
			}
			for _, c := range []struct {
				what         string
				span, parent *tracev1.Span
			}{{"the agent decision", agent, create}, {"the verifier's call", verify, agent}, {"the Slack post", post, finish},
				{"the wait for a person", wait, create}, {"the Slack update", update, create}} {
				if !testutil.ChildOf(c.span, c.parent) {
					t.Errorf("%s's parent is %x, want %q's %x", c.what, c.span.ParentSpanId, c.parent.Name, c.parent.SpanId)
				}
			}
			if a := testutil.SpanAttrs(verify); a["gen_ai.usage.input_tokens"] != "812" || a["gen_ai.usage.output_tokens"] != "9" ||
				a["gen_ai.request.model"] != "judge-1" {
				t.Errorf("the verifier call's attributes %v", a)
			}
			if a := testutil.SpanAttrs(agent); a["arbiter.task.next_status"] != arbiter.StatusHumanNeeded {
				t.Errorf("the agent decision's attributes %v", a)
			}

			// The desk's request: a trace of its own, which the wait links
			// to, holding the store's decision.
			var desk *tracev1.Span
			for _, s := range testutil.Named(receiver.Spans(), "POST /review/tasks/{id}", "http.response.status_code", "303") {
				if testutil.LinksTo(wait, s) {
					desk = s
				}
			}
			if desk == nil {
				t.Fatalf("the wait links to %v, no desk request that decided", wait.Links)
			}
			deskSpans := receiver.Trace(hex.EncodeToString(desk.TraceId))
			if hex.EncodeToString(desk.TraceId) == callerTrace || desk.ParentSpanId != nil || desk.Kind != tracev1.Span_SPAN_KIND_SERVER {
				t.Errorf("the desk's request is not the root of a trace of its own: trace %x, parent %x", desk.TraceId, desk.ParentSpanId)
			}
			if a := testutil.SpanAttrs(desk); a["http.route"] != "/review/tasks/{id}" {
				t.Errorf("the desk request's attributes %v", a)
			}
			if decision := one(deskSpans, "db DecideTask", "", ""); !testutil.ChildOf(decision, desk) {
				t.Errorf("the store's decision's parent is %x, want the desk request's %x", decision.ParentSpanId, desk.SpanId)
			}
			// (The store keeps milliseconds.)
			if wait.StartTimeUnixNano+uint64(time.Millisecond) < agent.StartTimeUnixNano || wait.EndTimeUnixNano < wait.StartTimeUnixNano ||
				wait.StartTimeUnixNano > agent.EndTimeUnixNano+uint64(time.Millisecond) || wait.EndTimeUnixNano > desk.EndTimeUnixNano {
				t.Errorf("the wait runs from %d to %d; the agent decision from %d to %d, the desk's request ends at %d", wait.StartTimeUnixNano,
					wait.EndTimeUnixNano, agent.StartTimeUnixNano, agent.EndTimeUnixNano, desk.EndTimeUnixNano)
			}

			// The task not sampled left no span anywhere.
			all := receiver.Spans()
			if found := receiver.Trace(untracedTrace); len(found) > 0 {
				t.Errorf("the trace not sampled holds %v", testutil.SpanNames(found))
			}
			for _, name := range []string{"agent decision", "verifier call", "slack deliver", "wait for a person"} {
				if found := testutil.Named(all, name, "arbiter.task_id", untracedID); len(found) > 0 {
					t.Errorf("the task not sampled has %d %q spans", len(found), name)
				}
			}
			for _, name := range []string{"POST /v1/tasks", "db FinishAgentAttempt"} {
				if found := testutil.Named(all, name, "", ""); len(found) != 1 {
					t.Errorf("%d %q spans were recorded, want the sampled task's one", len(found), name)
				}
			}
		})
	}
}

// verifierFunc is a verifier made of a function.
type verifierFunc func(context.Context, *arbiter.Task) (arbiter.Verification, error)

// Verify calls f.
func (f verifierFunc) Verify(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
	return f(ctx, t)
}

// inBackground runs run until the test ends or stop is called.
func inBackground(t *testing.T, run func(context.Context)) (stop func()) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(runCtx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
