package worker_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/telemetry"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/mail/mailtest"
	"github.com/arbiterhq/arbiter/worker"
)

// TestTrace_AReminderMailJoinsTheCreate exports by OTLP over HTTP to an
// in-process receiver, on both stores: a task created under a request's
// span waits for a person, its reminder fires in the sweep (a span of no
// trace) and its mail is sent; the mail's "mail deliver" span is in the
// create's trace, the create's child, and names the message, not its
// recipient or the task's text.
func TestTrace_AReminderMailJoinsTheCreate(t *testing.T) {
	clock := &movable{t: time.Now().Truncate(time.Millisecond)}
	dbtest.Each(t, db.Options{Now: clock.Now}, func(t *testing.T, store *db.DB) {
		ctx := t.Context()
		receiver, flush := testutil.TraceEverything(t)
		sink := mailtest.NewSink(t)
		mailer, err := mail.NewSMTP(sink.URL(), "arbiter@example.com")
		if err != nil {
			t.Fatal(err)
		}
		acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		createCtx, request := telemetry.Tracer().Start(ctx, "POST /v1/tasks", trace.WithSpanKind(trace.SpanKindServer))
		task, err := store.CreateTask(createCtx, acct.ID, arbiter.TaskCreate{Prompt: "Refund 12 EUR?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, Alerts: arbiter.Alerts{Reminders: []arbiter.AlertWait{{After: time.Minute}}}})
		if err != nil {
			t.Fatal(err)
		}
		request.End()
		if _, err := store.ClaimTasks(ctx, "wrk_trace", 10, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := store.FinishAgentAttempt(ctx, "wrk_trace", task.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Minute)
		if n, err := store.FireDueAlerts(ctx, 10); err != nil || n != 1 {
			t.Fatalf("fired %d, %v", n, err)
		}
		deliverer := worker.NewMailDeliverer(worker.MailConfig{Store: store, Mail: mailer, Permanent: mail.Permanent,
			Links: arbiter.MailLinks{QueueURL: "https://review.example.com/review"}, Poll: 10 * time.Millisecond,
			Jitter: func() float64 { return 0 }, Logger: slog.New(slog.DiscardHandler)})
		stop := runUntilStopped(t, "mail deliverer", 30*time.Second, deliverer.Run)
		waitUntil(t, "the reminder mail", func() bool { return len(sink.Peek()) > 0 })
		stop()
		flush()

		spans := receiver.Trace(request.SpanContext().TraceID().String())
		create := testutil.Named(spans, "POST /v1/tasks", "", "")
		sent := testutil.Named(spans, "mail deliver", "arbiter.message.kind", arbiter.MailReminder)
		if len(create) != 1 || len(sent) != 1 {
			t.Fatalf("the create's trace holds %v, want the create and one reminder's delivery", testutil.SpanNames(spans))
		}
		if !testutil.ChildOf(sent[0], create[0]) {
			t.Errorf("the mail's delivery's parent is %x, want the create's %x", sent[0].ParentSpanId, create[0].SpanId)
		}
		a := testutil.SpanAttrs(sent[0])
		if a["arbiter.task_id"] != task.ID || a["arbiter.delivery.outcome"] != "sent" || a["arbiter.message.id"] == "" {
			t.Errorf("the mail's delivery's attributes %v", a)
		}
		for _, s := range receiver.Spans() {
			for k, v := range testutil.SpanAttrs(s) {
				if strings.Contains(v, "owner@example.com") || strings.Contains(v, "Refund 12 EUR?") {
					t.Errorf("span %q's attribute %s holds the recipient or the task's text: %q", s.Name, k, v)
				}
			}
		}
	})
}
