package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.TeamsDeliveryService = (*DB)(nil)

// Teams messages: the delivery side of the Teams outbox (outbox_teams.go).
// Deliverers claim due rows under a lease, as for Slack messages (SKIP
// LOCKED on Postgres; the one writer on SQLite), take their
// conversation's turn in the store (turns.go), so that every process keeps
// one pace per conversation, and record each attempt, which moves the
// message on (arbiter.NextDelivery, arbiter.TeamsRetry).

var errTeamsLeaseLost = arbiter.Errorf(arbiter.ECONFLICT, "The delivery worker no longer holds the Teams message's lease.")

const teamsMessageColumns = `id, account_id, task_id, kind, conversation, attempts, activity_id, conversation_id, service_url,
	COALESCE(traceparent, '') AS traceparent`

// teamsMessageRow is a scanned row of teamsMessageColumns.
type teamsMessageRow struct {
	ID             string `db:"id"`
	AccountID      string `db:"account_id"`
	TaskID         string `db:"task_id"`
	Kind           string `db:"kind"`
	Conversation   string `db:"conversation"`
	Attempts       int    `db:"attempts"`
	ActivityID     string `db:"activity_id"`
	ConversationID string `db:"conversation_id"`
	ServiceURL     string `db:"service_url"`
	TraceParent    string `db:"traceparent"`
}

func (r *teamsMessageRow) message() *arbiter.TeamsMessage {
	return &arbiter.TeamsMessage{ID: r.ID, AccountID: r.AccountID, TaskID: r.TaskID, Kind: r.Kind, Conversation: r.Conversation,
		Attempts: r.Attempts, ActivityID: r.ActivityID, ConversationID: r.ConversationID, ServiceURL: r.ServiceURL,
		TraceParent: r.TraceParent}
}

// ClaimTeamsMessages leases up to max due messages to owner, oldest due
// first, in one statement, and returns each with its account's bot and
// the people whose own view its card names, the conversation it goes to,
// its task as it is now and, for an update, the task's posts there.
func (d *DB) ClaimTeamsMessages(ctx context.Context, owner string, max int, lease time.Duration) (_ []*arbiter.TeamsDelivery, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if max <= 0 {
		return nil, nil
	}
	var rows []teamsMessageRow
	if err := d.db.SelectContext(ctx, &rows, d.leaseDueSQL("teams_messages", teamsMessageColumns),
		owner, lease.Milliseconds(), int64(d.nowMS()), max); err != nil {
		return nil, fmt.Errorf("claim Teams messages: %w", err)
	}
	out := make([]*arbiter.TeamsDelivery, 0, len(rows))
	type bot struct {
		conn     *arbiter.TeamsConnection
		deciders []string
	}
	bots := map[string]bot{}
	for i := range rows {
		dl := &arbiter.TeamsDelivery{Message: rows[i].message()}
		m := dl.Message
		b, ok := bots[m.AccountID]
		if !ok {
			b.conn, err = d.findTeamsConnection(ctx, "account_id", m.AccountID)
			if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				return nil, err
			}
			if b.conn != nil {
				if b.deciders, err = d.teamsDeciders(ctx, m.AccountID, b.conn.AppID); err != nil {
					return nil, err
				}
			}
			bots[m.AccountID] = b
		}
		dl.Connection, dl.Deciders = b.conn, b.deciders
		if dl.Task, err = d.findTask(ctx, nil, m.AccountID, m.TaskID); err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			return nil, err
		}
		var c teamsConversationRow
		err := d.db.GetContext(ctx, &c, d.rebind(`SELECT `+teamsConversationColumns+` FROM teams_conversations
			WHERE account_id = ? AND name = ?`), m.AccountID, m.Conversation)
		if err == nil {
			dl.Conversation = c.conversation()
		} else if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("find the Teams conversation: %w", err)
		}
		if m.Kind == arbiter.TeamsUpdate {
			if err := d.readTeamsPosts(ctx, dl); err != nil {
				return nil, err
			}
		}
		out = append(out, dl)
	}
	return out, nil
}

// readTeamsPosts reads into an update's delivery the posts of its task in
// its conversation: those sent, which it updates, and whether one is
// still pending, which it waits for.
func (d *DB) readTeamsPosts(ctx context.Context, dl *arbiter.TeamsDelivery) error {
	var posts []struct {
		teamsMessageRow
		Status string `db:"status"`
	}
	if err := d.db.SelectContext(ctx, &posts, d.rebind(`SELECT `+teamsMessageColumns+`, status FROM teams_messages
		WHERE task_id = ? AND kind = ? AND conversation = ? ORDER BY created_at, id`),
		dl.Message.TaskID, arbiter.TeamsPost, dl.Message.Conversation); err != nil {
		return fmt.Errorf("find Teams posts: %w", err)
	}
	for i := range posts {
		switch posts[i].Status {
		case arbiter.TeamsSent:
			dl.Posts = append(dl.Posts, posts[i].message())
		case arbiter.TeamsPending:
			dl.PostsPending = true
		}
	}
	return nil
}

// BeginTeamsAttempt takes the turn of the message's conversation, in the
// store so that every process shares it, on the database's clock; when
// the turn is not free it returns how long until its pause ends, or that
// another message holds it.
func (d *DB) BeginTeamsAttempt(ctx context.Context, owner, id string, lease time.Duration) (pause time.Duration, held bool, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	err = d.transact(ctx, func(tx *Tx) error {
		var m struct {
			AccountID    string `db:"account_id"`
			Conversation string `db:"conversation"`
		}
		if err := tx.GetContext(ctx, &m, d.rebind(`SELECT account_id, conversation FROM teams_messages
			WHERE id = ? AND lease_owner = ?`), id, owner); errors.Is(err, sql.ErrNoRows) {
			return errTeamsLeaseLost
		} else if err != nil {
			return fmt.Errorf("find Teams message: %w", err)
		}
		var err error
		_, pause, held, err = teamsTurns.take(ctx, tx, m.AccountID, m.Conversation, id, lease)
		return err
	})
	return pause, held, err
}

// RecordTeamsAttempt moves the message on as step says, keeps where a
// post's card went, ends its lease and, when the attempt held its
// conversation's turn, gives the turn back, quiet for r.Quiet.
func (d *DB) RecordTeamsAttempt(ctx context.Context, owner, id string, step arbiter.DeliveryStep, r arbiter.TeamsResult) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		status := arbiter.TeamsStatusOf(step)
		var sentAt sql.NullInt64
		if status == arbiter.TeamsSent {
			sentAt = sql.NullInt64{Int64: int64(tx.now), Valid: true}
		}
		var m struct {
			AccountID    string `db:"account_id"`
			Conversation string `db:"conversation"`
		}
		err := tx.GetContext(ctx, &m, d.rebind(`UPDATE teams_messages SET status = ?, attempts = ?, next_attempt_at = ?,
			lease_owner = NULL, lease_expires_at = NULL, last_error = ?, sent_at = COALESCE(?, sent_at),
			activity_id = CASE WHEN ? = '' THEN activity_id ELSE ? END,
			conversation_id = CASE WHEN ? = '' THEN conversation_id ELSE ? END,
			service_url = CASE WHEN ? = '' THEN service_url ELSE ? END
			WHERE id = ? AND lease_owner = ? AND status = '`+arbiter.TeamsPending+`' RETURNING account_id, conversation`),
			status, step.Attempts, int64(tx.now)+step.Delay.Milliseconds(), truncate(r.Error, 500), sentAt,
			r.ActivityID, r.ActivityID, r.ConversationID, r.ConversationID, r.ServiceURL, r.ServiceURL, id, owner)
		if errors.Is(err, sql.ErrNoRows) {
			return errTeamsLeaseLost
		} else if err != nil {
			return fmt.Errorf("record Teams attempt: %w", err)
		}
		return teamsTurns.giveBack(ctx, tx, m.AccountID, m.Conversation, id, r.Quiet)
	})
}

// ReleaseTeamsMessages ends the leases owner still holds.
func (d *DB) ReleaseTeamsMessages(ctx context.Context, owner string) (err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.releaseLeasesSQL("teams_messages"), owner); err != nil {
		return fmt.Errorf("release Teams messages: %w", err)
	}
	return nil
}
