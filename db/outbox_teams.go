package db

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// The Teams outbox: a task that goes to a person gets a "post" row for the
// account's default conversation, or for each Teams conversation of its
// own notify list; so does a task the agent completed that waits for its
// blind audit, and a task whose reminder or escalation rung came due
// (asked again, as Slack's). A task that ended, or changed what its card
// shows (a vote, an audit answered), gets an "update" row per conversation
// its card was posted to, which rewrites every card there. The deliverer
// (worker.TeamsDeliverer) claims them and renders each from the task as
// it is then (teams_messages.go).

// teamsOutbox writes Teams messages.
type teamsOutbox struct {
	db   *DB
	wake wakeup
}

// newTeamsOutbox returns the Teams outbox of d, for Open to register.
func newTeamsOutbox(d *DB) *teamsOutbox { return &teamsOutbox{db: d, wake: newWakeup()} }

// TeamsMessagesQueued returns a channel that receives when this process
// queued Teams messages, so an in-process deliverer sends them at once.
func (d *DB) TeamsMessagesQueued() <-chan struct{} { return outboxOf[*teamsOutbox](d).wake }

// What an event asks of the Teams outbox.
const (
	teamsIgnore  = iota
	teamsAsk     // post the question
	teamsChanged // update the posted cards, or ask for the blind audit the task waits for
	teamsAudited // update the posted cards
)

// teamsKindOf returns what an event of the type asks of the Teams outbox.
// An escalation's and a reminder's question is asked again; a drift
// changes nothing a card shows.
func teamsKindOf(eventType string) int {
	switch eventType {
	case arbiter.EventTaskHumanNeeded, arbiter.EventTaskReminded, arbiter.EventTaskEscalated:
		return teamsAsk
	case arbiter.EventTaskCompleted, arbiter.EventTaskExpired, arbiter.EventTaskAuditDisagreed, arbiter.EventTaskVoteRecorded:
		return teamsChanged
	case arbiter.EventTaskAuditAnswered:
		return teamsAudited
	}
	return teamsIgnore
}

// teamsPlan is what the outbox read to write the messages of events.
type teamsPlan struct {
	// defaults are the default conversations ("" for none) of the
	// accounts with a bot.
	defaults map[string]string
	// posts holds, of each task posted before, the conversations it was
	// posted to (posts sent or not); waiting, the tasks that wait for
	// their blind audit; own, the Teams conversations of the notify
	// lists of the tasks asked about.
	posts   map[string][]string
	waiting map[string]bool
	own     map[string][]string
}

// plan reads where the Teams messages of the events of accounts with a
// bot go; its write inserts them. It costs one query when no account of
// the events has one.
func (o *teamsOutbox) plan(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) (outboxWrite, error) {
	var mine []arbiter.TaskEvent
	for _, ev := range events {
		if teamsKindOf(ev.Type) != teamsIgnore {
			mine = append(mine, ev)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	p := teamsPlan{defaults: map[string]string{}}
	var conns []struct {
		AccountID string `db:"account_id"`
		Default   string `db:"default_conversation"`
	}
	if err := o.db.selectOfAccounts(ctx, tx, &conns, `SELECT account_id, default_conversation FROM teams_connections`, ``,
		accountsOf(mine)); err != nil {
		return nil, fmt.Errorf("find Teams connections: %w", err)
	}
	if len(conns) == 0 {
		return nil, nil
	}
	for _, c := range conns {
		p.defaults[c.AccountID] = c.Default
	}
	if err := o.readPlan(ctx, tx, mine, &p); err != nil {
		return nil, err
	}
	var msgs []*arbiter.TeamsMessage
	for _, ev := range mine {
		def, ok := p.defaults[ev.AccountID]
		if !ok {
			continue
		}
		to, kind := p.posts[ev.TaskID], arbiter.TeamsUpdate
		if teamsKindOf(ev.Type) == teamsAsk || p.waiting[ev.TaskID] {
			// A notify list names where the task goes: its Teams
			// conversations, none when it names only other chats'.
			own, named := p.own[ev.TaskID]
			to, kind = own, arbiter.TeamsPost
			if !named && def != "" {
				to = []string{def}
			}
		}
		for _, c := range to {
			msgs = append(msgs, &arbiter.TeamsMessage{ID: arbiter.NewTeamsMessageID(), AccountID: ev.AccountID, TaskID: ev.TaskID,
				Kind: kind, Conversation: c, TraceParent: ev.TraceParent})
		}
	}
	return writeOf(msgs, o.insert), nil
}

// readPlan reads into p, for the events of accounts with a bot, where the
// tasks that changed were posted and which of them wait for a blind
// audit, and the own conversations of the tasks asked about.
func (o *teamsOutbox) readPlan(ctx context.Context, tx *Tx, events []arbiter.TaskEvent, p *teamsPlan) error {
	var changed, ended []any
	for _, ev := range events {
		if _, ok := p.defaults[ev.AccountID]; ok && teamsKindOf(ev.Type) != teamsAsk {
			changed = append(changed, ev.TaskID)
			if teamsKindOf(ev.Type) == teamsChanged {
				ended = append(ended, ev.TaskID)
			}
		}
	}
	p.posts, p.waiting, p.own = map[string][]string{}, map[string]bool{}, map[string][]string{}
	if len(changed) > 0 {
		var posts []struct {
			TaskID       string `db:"task_id"`
			Conversation string `db:"conversation"`
		}
		if err := o.db.selectIn(ctx, tx, &posts, `SELECT DISTINCT task_id, conversation FROM teams_messages
			WHERE kind = '`+arbiter.TeamsPost+`' AND task_id IN (?) ORDER BY task_id, conversation`, changed); err != nil {
			return fmt.Errorf("find Teams posts: %w", err)
		}
		for _, post := range posts {
			p.posts[post.TaskID] = append(p.posts[post.TaskID], post.Conversation)
		}
	}
	if len(ended) > 0 {
		var ids []string
		if err := o.db.selectIn(ctx, tx, &ids, `SELECT id FROM tasks WHERE audit_state = '`+arbiter.AuditStateWaiting+`'
			AND id IN (?)`, ended); err != nil {
			return fmt.Errorf("find audited tasks: %w", err)
		}
		for _, id := range ids {
			p.waiting[id] = true
		}
	}
	var asked []any
	for _, ev := range events {
		if _, ok := p.defaults[ev.AccountID]; ok && (teamsKindOf(ev.Type) == teamsAsk || p.waiting[ev.TaskID]) {
			asked = append(asked, ev.TaskID)
		}
	}
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
		p.own[r.ID] = arbiter.TeamsTargets(strings.Split(r.Notify, ","))
	}
	return nil
}

// insert stores new messages in tx, due at once, and has the deliverer
// woken after the commit.
func (o *teamsOutbox) insert(ctx context.Context, tx *Tx, msgs []*arbiter.TeamsMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	tx.queue(o.wake)
	now := int64(tx.now)
	var b strings.Builder
	b.WriteString(`INSERT INTO teams_messages (id, account_id, task_id, kind, conversation, status, next_attempt_at, created_at,
		traceparent) VALUES `)
	args := make([]any, 0, 9*len(msgs))
	// The delivery joins the trace of the span that queued it.
	traceParent := telemetry.TraceParent(ctx)
	for i, m := range msgs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, m.ID, m.AccountID, m.TaskID, m.Kind, m.Conversation, arbiter.TeamsPending, now, now,
			nullText(cmp.Or(m.TraceParent, traceParent)))
	}
	if _, err := tx.ExecContext(ctx, o.db.rebind(b.String()), args...); err != nil {
		return fmt.Errorf("insert Teams messages: %w", err)
	}
	return nil
}
