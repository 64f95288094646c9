package db

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// The Slack outbox: a task that goes to a person gets a "post" row for the
// account's channel, or for each channel of the task's own notify list; so
// does a task the agent completed that waits for its blind audit, and a
// task whose reminder or escalation rung came due (asked again). A task
// that ended, or whose audit was answered, gets an "update" row, which
// rewrites every posted copy. The deliverer (worker.SlackDeliverer) claims
// them and renders each from the task as it is then (slack.go).

// slackOutbox writes Slack messages.
type slackOutbox struct {
	db   *DB
	wake wakeup
}

// newSlackOutbox returns the Slack outbox of d, for Open to register.
func newSlackOutbox(d *DB) *slackOutbox { return &slackOutbox{db: d, wake: newWakeup()} }

// SlackMessagesQueued returns a channel that receives when this process
// queued Slack messages, so an in-process deliverer sends them at once.
func (d *DB) SlackMessagesQueued() <-chan struct{} { return outboxOf[*slackOutbox](d).wake }

// What an event asks of the Slack outbox.
const (
	slackIgnore   = iota
	slackAsk      // post the question
	slackEnded    // update the posted copies, or ask for the blind audit the task waits for
	slackAnswered // update the posted copies
)

// slackKindOf returns what an event of the type asks of the Slack outbox.
// An escalation's and a reminder's question is asked again; a drift
// changes nothing a copy shows.
func slackKindOf(eventType string) int {
	switch eventType {
	case arbiter.EventTaskHumanNeeded, arbiter.EventTaskReminded, arbiter.EventTaskEscalated:
		return slackAsk
	case arbiter.EventTaskCompleted, arbiter.EventTaskExpired, arbiter.EventTaskAuditDisagreed, arbiter.EventTaskVoteRecorded:
		return slackEnded
	case arbiter.EventTaskAuditAnswered:
		return slackAnswered
	}
	return slackIgnore
}

// slackPlan is what the outbox read to write the messages of events.
type slackPlan struct {
	// channels are the default channels of the connected accounts.
	channels map[string]string
	// posts holds, of each task posted before, the channels it was
	// posted to (posts sent or not); audited holds the tasks that wait
	// for their blind audit.
	posts   map[string][]string
	audited map[string]bool
	// notify holds the tasks' own channels, for the tasks asked about.
	notify map[string][]string
}

// plan reads where the Slack messages of the events of connected
// accounts go; its write inserts them. It costs one query when no account
// of the events is connected.
func (o *slackOutbox) plan(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) (outboxWrite, error) {
	var mine []arbiter.TaskEvent
	for _, ev := range events {
		if slackKindOf(ev.Type) != slackIgnore {
			mine = append(mine, ev)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	var p slackPlan
	var err error
	if p.channels, err = o.db.slackChannels(ctx, tx, accountsOf(mine)); err != nil || len(p.channels) == 0 {
		return nil, err
	}
	if err := o.readPosts(ctx, tx, mine, &p); err != nil {
		return nil, err
	}
	if err := o.readNotify(ctx, tx, mine, &p); err != nil {
		return nil, err
	}
	var msgs []*arbiter.SlackMessage
	for _, ev := range mine {
		channel, ok := p.channels[ev.AccountID]
		if !ok {
			continue
		}
		to := p.posts[ev.TaskID] // an update rewrites the posts of each channel, paced by it
		kind := arbiter.SlackUpdate
		if slackKindOf(ev.Type) == slackAsk || p.audited[ev.TaskID] {
			to, kind = []string{channel}, arbiter.SlackPost
			if own, named := p.notify[ev.TaskID]; named {
				// A notify list names where the task goes: its Slack
				// channels, none when it names only other chats'.
				to = own
			}
		}
		for _, c := range to {
			msgs = append(msgs, &arbiter.SlackMessage{ID: arbiter.NewSlackMessageID(), AccountID: ev.AccountID, TaskID: ev.TaskID,
				Kind: kind, Channel: c, TraceParent: ev.TraceParent})
		}
	}
	return writeOf(msgs, o.insert), nil
}

// readPosts reads into p, for the events that may update posted copies,
// which of their tasks were posted and which wait for a blind audit.
func (o *slackOutbox) readPosts(ctx context.Context, tx *Tx, events []arbiter.TaskEvent, p *slackPlan) error {
	var ended, answered []any
	for _, ev := range events {
		if _, ok := p.channels[ev.AccountID]; ok {
			switch slackKindOf(ev.Type) {
			case slackEnded:
				ended = append(ended, ev.TaskID)
			case slackAnswered:
				answered = append(answered, ev.TaskID)
			}
		}
	}
	p.posts, p.audited = map[string][]string{}, map[string]bool{}
	if len(ended)+len(answered) == 0 {
		return nil
	}
	var posts []struct {
		TaskID  string `db:"task_id"`
		Channel string `db:"channel"`
	}
	if err := o.db.selectIn(ctx, tx, &posts, `SELECT DISTINCT task_id, channel FROM slack_messages WHERE kind = '`+arbiter.SlackPost+`'
		AND task_id IN (?) ORDER BY task_id, channel`, append(ended, answered...)); err != nil {
		return fmt.Errorf("find Slack posts: %w", err)
	}
	for _, post := range posts {
		p.posts[post.TaskID] = append(p.posts[post.TaskID], post.Channel)
	}
	if len(ended) == 0 {
		return nil
	}
	var ids []string
	if err := o.db.selectIn(ctx, tx, &ids, `SELECT id FROM tasks WHERE audit_state = '`+arbiter.AuditStateWaiting+`' AND id IN (?)`, ended); err != nil {
		return fmt.Errorf("find audited tasks: %w", err)
	}
	for _, id := range ids {
		p.audited[id] = true
	}
	return nil
}

// readNotify reads into p the own channels of the tasks the events ask
// about: a task's notify list takes the place of the account's channel,
// and holds none for a list that names only other chats' targets.
func (o *slackOutbox) readNotify(ctx context.Context, tx *Tx, events []arbiter.TaskEvent, p *slackPlan) error {
	var asked []any
	for _, ev := range events {
		kind := slackKindOf(ev.Type)
		if _, ok := p.channels[ev.AccountID]; ok && (kind == slackAsk || kind == slackEnded && p.audited[ev.TaskID]) {
			asked = append(asked, ev.TaskID)
		}
	}
	p.notify = map[string][]string{}
	if len(asked) == 0 {
		return nil
	}
	var rows []struct {
		ID     string `db:"id"`
		Notify string `db:"notify"`
	}
	if err := o.db.selectIn(ctx, tx, &rows, `SELECT id, notify FROM tasks WHERE notify <> '' AND id IN (?)`, asked); err != nil {
		return fmt.Errorf("find tasks' notify lists: %w", err)
	}
	for _, r := range rows {
		p.notify[r.ID] = arbiter.SlackChannels(strings.Split(r.Notify, ","))
	}
	return nil
}

// insert stores new messages in tx, due at once, and has the deliverer
// woken after the commit.
func (o *slackOutbox) insert(ctx context.Context, tx *Tx, msgs []*arbiter.SlackMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	tx.queue(o.wake)
	now := int64(tx.now)
	var b strings.Builder
	b.WriteString(`INSERT INTO slack_messages (id, account_id, task_id, kind, channel, status, next_attempt_at, created_at,
		traceparent) VALUES `)
	args := make([]any, 0, 9*len(msgs))
	// The delivery joins the trace of the span that queued it.
	traceParent := telemetry.TraceParent(ctx)
	for i, m := range msgs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, m.ID, m.AccountID, m.TaskID, m.Kind, m.Channel, arbiter.SlackPending, now, now,
			nullText(cmp.Or(m.TraceParent, traceParent)))
	}
	if _, err := tx.ExecContext(ctx, o.db.rebind(b.String()), args...); err != nil {
		return fmt.Errorf("insert Slack messages: %w", err)
	}
	return nil
}

// slackChannels returns, by account, the default channel of each account
// of accountIDs that has Slack connected.
func (d *DB) slackChannels(ctx context.Context, tx *Tx, accountIDs []string) (map[string]string, error) {
	var conns []struct {
		AccountID string `db:"account_id"`
		Channel   string `db:"default_channel"`
	}
	if err := d.selectOfAccounts(ctx, tx, &conns, `SELECT account_id, default_channel FROM slack_connections`, ``, accountIDs); err != nil {
		return nil, fmt.Errorf("find Slack connections: %w", err)
	}
	channels := make(map[string]string, len(conns))
	for _, c := range conns {
		channels[c.AccountID] = c.Channel
	}
	return channels, nil
}
