package db

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// The webhook outbox: a message of each announced event (arbiter.Announced)
// for each endpoint of its account that wants it (held for a disabled one)
// and, for a task's event, for the task's callback_url; the payload holds
// the task as it is in the transaction, or for calibration.drifted the
// crossing. The deliverer (worker.Deliverer) claims them (webhook.go).

// webhookOutbox writes webhook messages.
type webhookOutbox struct {
	db   *DB
	wake wakeup
}

// newWebhookOutbox returns the webhook outbox of d, for Open to register.
func newWebhookOutbox(d *DB) *webhookOutbox { return &webhookOutbox{db: d, wake: newWakeup()} }

// WebhooksQueued returns a channel that receives when messages were queued
// by this process, so an in-process delivery worker sends them at once
// instead of at its next poll.
func (d *DB) WebhooksQueued() <-chan struct{} { return outboxOf[*webhookOutbox](d).wake }

// webhookDestination is where one event's message goes: an endpoint, with
// the status its message starts in, or a callback URL.
type webhookDestination struct{ endpointID, url, status string }

// plan reads where the announced events' messages go and, for those of
// tasks, the tasks; its write makes the messages. It costs one query when
// no endpoint and no callback wants any of them.
func (o *webhookOutbox) plan(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) (outboxWrite, error) {
	var announced []arbiter.TaskEvent
	for _, ev := range events {
		if arbiter.Announced(ev.Type) {
			announced = append(announced, ev)
		}
	}
	if len(announced) == 0 {
		return nil, nil
	}
	dests, err := o.destinations(ctx, tx, announced)
	if err != nil || dests == nil {
		return nil, err
	}
	var taskIDs []string
	for i, ev := range announced {
		if len(dests[i]) > 0 && ev.Drift == nil {
			taskIDs = append(taskIDs, ev.TaskID)
		}
	}
	tasks, err := o.db.tasksIn(ctx, tx, taskIDs)
	if err != nil {
		return nil, fmt.Errorf("read tasks for webhooks: %w", err)
	}
	return func(ctx context.Context, tx *Tx) error {
		msgs, err := o.messages(tx, announced, dests, tasks)
		if err != nil {
			return err
		}
		return o.insert(ctx, tx, msgs)
	}, nil
}

// destinations returns, for each event, where its messages go: the
// endpoints of its account that want it, and its task's callback_url,
// whose account gets a callback secret on first use. It returns nil when
// no event has anywhere to go.
func (o *webhookOutbox) destinations(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) ([][]webhookDestination, error) {
	d := o.db
	var endpoints []endpointTarget
	if err := d.selectOfAccounts(ctx, tx, &endpoints, `SELECT id, account_id, event_types, disabled FROM webhook_endpoints`,
		`ORDER BY id`, accountsOf(events)); err != nil {
		return nil, fmt.Errorf("find endpoints: %w", err)
	}
	dests := make([][]webhookDestination, len(events))
	any := false
	for i, ev := range events {
		for _, e := range endpoints {
			if status, ok := e.statusFor(ev.Type); ok && e.AccountID == ev.AccountID {
				dests[i] = append(dests[i], webhookDestination{endpointID: e.ID, status: status})
			}
		}
		// Callback URLs belong to tasks: an account's event gets none.
		if ev.CallbackURL != "" && ev.Drift == nil {
			dests[i] = append(dests[i], webhookDestination{url: ev.CallbackURL})
			if err := d.ensureCallbackSecret(ctx, tx, ev.AccountID); err != nil {
				return nil, err
			}
		}
		any = any || len(dests[i]) > 0
	}
	if !any {
		return nil, nil
	}
	return dests, nil
}

// messages returns the events' messages to their destinations, the
// payload of a task's event holding the task as plan read it, with the
// receipt the transaction signed since.
func (o *webhookOutbox) messages(tx *Tx, events []arbiter.TaskEvent, dests [][]webhookDestination, tasks map[string]*arbiter.Task) ([]*arbiter.WebhookMessage, error) {
	now := o.db.now()
	var msgs []*arbiter.WebhookMessage
	for i, ev := range events {
		if len(dests[i]) == 0 {
			continue
		}
		at, data := now, any(ev.Drift)
		if ev.Drift == nil {
			t := tasks[ev.TaskID]
			if t == nil {
				continue
			}
			at, data = arbiter.TaskEventTime(ev.Type, t, now), t
			if ev.Type == arbiter.EventTaskVoteRecorded {
				data = arbiter.VoteCountOf(t) // the count only: votes are blind
			} else {
				shown := *t // as the API shows it; the read stays whole
				shown.HideOpenVotes()
				if receipt, ok := tx.receipts[t.ID]; ok {
					shown.Receipt = receipt
				}
				data = &shown
			}
		}
		payload, err := arbiter.NewWebhookPayload(ev.Type, at, data)
		if err != nil {
			return nil, fmt.Errorf("webhook payload: %w", err)
		}
		for _, dest := range dests[i] {
			msgs = append(msgs, &arbiter.WebhookMessage{ID: arbiter.NewWebhookMessageID(), AccountID: ev.AccountID,
				EndpointID: dest.endpointID, URL: dest.url, EventType: ev.Type, TaskID: ev.TaskID, Payload: payload, Status: dest.status,
				NextAttemptAt: arbiter.TimestampOf(now), CreatedAt: arbiter.TimestampOf(now), TraceParent: ev.TraceParent})
		}
	}
	return msgs, nil
}

// insert stores new messages in tx, pending unless their Status says
// otherwise, and has the deliverer woken after the commit.
func (o *webhookOutbox) insert(ctx context.Context, tx *Tx, msgs []*arbiter.WebhookMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	tx.queue(o.wake)
	const cols = 11
	// The delivery joins the trace of the span that queued it.
	traceParent := telemetry.TraceParent(ctx)
	for start := 0; start < len(msgs); start += 100 {
		chunk := msgs[start:min(start+100, len(msgs))]
		var b strings.Builder
		b.WriteString(`INSERT INTO webhook_messages (id, account_id, endpoint_id, url, event_type, task_id, payload,
			status, next_attempt_at, created_at, traceparent) VALUES `)
		args := make([]any, 0, len(chunk)*cols)
		for i, m := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			var endpoint, task any
			url := m.URL
			if m.EndpointID != "" {
				endpoint, url = m.EndpointID, ""
			}
			if m.TaskID != "" {
				task = m.TaskID
			}
			status := m.Status
			if status == "" {
				status = arbiter.WebhookPending
			}
			args = append(args, m.ID, m.AccountID, endpoint, url, m.EventType, task, string(m.Payload),
				status, int64(m.NextAttemptAt), int64(m.CreatedAt), nullText(cmp.Or(m.TraceParent, traceParent)))
		}
		if _, err := tx.ExecContext(ctx, o.db.rebind(b.String()), args...); err != nil {
			return fmt.Errorf("insert webhook messages: %w", err)
		}
	}
	return nil
}

// endpointTarget is what the outbox reads of an endpoint to queue an
// event's message for it.
type endpointTarget struct {
	ID         string `db:"id"`
	AccountID  string `db:"account_id"`
	EventTypes string `db:"event_types"`
	Disabled   string `db:"disabled"`
}

// statusFor says whether the endpoint wants an event of the type, and the
// status its message starts in: pending, or held while it is disabled.
func (e endpointTarget) statusFor(eventType string) (string, bool) {
	if !(&arbiter.WebhookEndpoint{EventTypes: splitTypes(e.EventTypes)}).Wants(eventType) {
		return "", false
	}
	if e.Disabled != "" {
		return arbiter.WebhookHeld, true
	}
	return arbiter.WebhookPending, true
}

func splitTypes(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// accountsOf returns the accounts of the events, each once, in the order
// they first appear.
func accountsOf(events []arbiter.TaskEvent) []string {
	seen := make(map[string]bool, 1)
	var ids []string
	for _, ev := range events {
		if !seen[ev.AccountID] {
			seen[ev.AccountID] = true
			ids = append(ids, ev.AccountID)
		}
	}
	return ids
}

// selectOfAccounts reads into dest the rows of selectFrom (a SELECT …
// FROM a table with an account_id column) of the accounts, then, when
// not "", the clause orderBy. On Postgres it is one statement, prepared
// in tx, over an array of the accounts (one round trip, where a
// statement sent with its arguments unprepared takes two); on SQLite,
// whose statements cost no round trip, a list.
func (d *DB) selectOfAccounts(ctx context.Context, tx *Tx, dest any, selectFrom, orderBy string, accountIDs []string) error {
	if !d.takesArrays() {
		return d.selectIn(ctx, tx, dest, selectFrom+` WHERE account_id IN (?) `+orderBy, accountIDs)
	}
	stmt, err := tx.stmt(ctx, selectFrom+` WHERE account_id = ANY(?::text[]) `+orderBy)
	if err != nil {
		return err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(accountIDs))
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqlx.StructScan(rows, dest)
}

// tasksIn reads, in tx, the tasks of ids with their attempts, by id; none
// when ids is empty.
func (d *DB) tasksIn(ctx context.Context, tx *Tx, ids []string) (map[string]*arbiter.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := d.queryIn(ctx, tx, tasksWithAttemptsSQL+` WHERE t.id IN (?) ORDER BY t.id, a.id`, ids)
	if err != nil {
		return nil, err
	}
	tasks, err := scanTasksWithAttempts(rows)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*arbiter.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	return byID, nil
}

var _ = time.Now
