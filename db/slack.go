package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var (
	_ arbiter.SlackService         = (*DB)(nil)
	_ arbiter.SlackDeliveryService = (*DB)(nil)
)

// Slack: an account's connection, and the outbox of its messages.
//
// The transaction that sends a task to a person writes its "post" rows,
// and one that ends it its "update" rows (outbox_slack.go). Delivery
// workers claim due rows under a lease, as for webhook messages, and
// render each message from the task as it is when it is sent.

var (
	errSlackNotConnected = arbiter.Errorf(arbiter.ENOTFOUND, "Slack is not connected to this account.")
	errSlackLeaseLost    = arbiter.Errorf(arbiter.ECONFLICT, "The delivery worker no longer holds the Slack message's lease.")
)

const slackConnectionColumns = `account_id, mode, bot_token, app_token, signing_secret, team_id, default_channel, created_at`

// slackConnectionRow is a scanned row of slackConnectionColumns.
type slackConnectionRow struct {
	AccountID      string `db:"account_id"`
	Mode           string `db:"mode"`
	BotToken       string `db:"bot_token"`
	AppToken       string `db:"app_token"`
	SigningSecret  string `db:"signing_secret"`
	TeamID         string `db:"team_id"`
	DefaultChannel string `db:"default_channel"`
	CreatedAt      int64  `db:"created_at"`
}

// connection returns the row's connection, its secrets opened.
func (d *DB) slackConnectionOf(r *slackConnectionRow) (*arbiter.SlackConnection, error) {
	c := &arbiter.SlackConnection{AccountID: r.AccountID, Mode: r.Mode, TeamID: r.TeamID,
		DefaultChannel: r.DefaultChannel, CreatedAt: arbiter.Timestamp(r.CreatedAt)}
	for _, f := range []struct {
		stored string
		out    *string
	}{
		{r.BotToken, &c.BotToken}, {r.AppToken, &c.AppToken}, {r.SigningSecret, &c.SigningSecret},
	} {
		v, err := d.secrets.Open(f.stored, r.AccountID)
		if err != nil {
			return nil, fmt.Errorf("open the Slack connection of account %s: %w", r.AccountID, err)
		}
		*f.out = v
	}
	return c, nil
}

// ConnectSlack stores the account's Slack connection, its tokens sealed,
// replacing any, and records it in the audit log, in one transaction.
func (d *DB) ConnectSlack(ctx context.Context, accountID string, in arbiter.SlackConnectionInput, teamID string, by arbiter.Actor) (_ *arbiter.SlackConnection, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if d.secrets == nil {
		return nil, arbiter.ErrSlackNeedsKey
	}
	c := &arbiter.SlackConnection{AccountID: accountID, Mode: in.Mode, BotToken: in.BotToken, AppToken: in.AppToken,
		SigningSecret: in.SigningSecret, TeamID: teamID, DefaultChannel: in.DefaultChannel, CreatedAt: d.nowMS()}
	sealed := make([]string, 3)
	for i, v := range []string{c.BotToken, c.AppToken, c.SigningSecret} {
		if sealed[i], err = d.seal(v, accountID); err != nil {
			return nil, err
		}
	}
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageSettings); err != nil {
			return err
		}
		var others int
		if err := tx.GetContext(ctx, &others, d.rebind(`SELECT COUNT(*) FROM slack_connections
			WHERE team_id = ? AND account_id <> ?`), teamID, accountID); err != nil {
			return fmt.Errorf("count the workspace's Slack connections: %w", err)
		}
		if others >= arbiter.MaxSlackAccountsPerWorkspace {
			return arbiter.ErrSlackWorkspaceFull
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO slack_connections (`+slackConnectionColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id) DO UPDATE SET mode = excluded.mode, bot_token = excluded.bot_token,
				app_token = excluded.app_token, signing_secret = excluded.signing_secret, team_id = excluded.team_id,
				default_channel = excluded.default_channel, created_at = excluded.created_at`),
			accountID, c.Mode, sealed[0], sealed[1], sealed[2], c.TeamID, c.DefaultChannel, int64(c.CreatedAt)); err != nil {
			return fmt.Errorf("store Slack connection: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewSlackAuditEvent(arbiter.AuditSlackConnected, accountID, c, by))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DisconnectSlack forgets the account's connection and its unsent
// messages, and records it in the audit log, in one transaction.
func (d *DB) DisconnectSlack(ctx context.Context, accountID string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageSettings); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM slack_connections WHERE account_id = ?`), accountID)
		if err != nil {
			return fmt.Errorf("delete Slack connection: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errSlackNotConnected
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM slack_messages WHERE account_id = ? AND status = ?`),
			accountID, arbiter.SlackPending); err != nil {
			return fmt.Errorf("delete Slack messages: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewSlackAuditEvent(arbiter.AuditSlackDisconnected, accountID, nil, by))
	})
}

// FindSlackConnection returns the account's connection, or ENOTFOUND.
func (d *DB) FindSlackConnection(ctx context.Context, accountID string) (_ *arbiter.SlackConnection, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.findSlackConnection(ctx, d.db, accountID)
}

func (d *DB) findSlackConnection(ctx context.Context, q sqlx.QueryerContext, accountID string) (*arbiter.SlackConnection, error) {
	var r slackConnectionRow
	if err := sqlx.GetContext(ctx, q, &r, d.rebind(`SELECT `+slackConnectionColumns+` FROM slack_connections
		WHERE account_id = ?`), accountID); err != nil {
		return nil, notFound(err, errSlackNotConnected.Message)
	}
	return d.slackConnectionOf(&r)
}

// ListSlackConnections returns the connections in mode, of the workspace
// teamID unless it is "".
func (d *DB) ListSlackConnections(ctx context.Context, mode, teamID string) (_ []*arbiter.SlackConnection, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var rows []slackConnectionRow
	if err := d.db.SelectContext(ctx, &rows, d.rebind(`SELECT `+slackConnectionColumns+` FROM slack_connections
		WHERE mode = ? AND (? = '' OR team_id = ?) ORDER BY account_id`), mode, teamID, teamID); err != nil {
		return nil, fmt.Errorf("list Slack connections: %w", err)
	}
	out := make([]*arbiter.SlackConnection, 0, len(rows))
	for i := range rows {
		c, err := d.slackConnectionOf(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

const slackMessageColumns = `id, account_id, task_id, kind, channel, attempts, channel_id, ts,
	COALESCE(post_started_at, 0) AS post_started_at, COALESCE(traceparent, '') AS traceparent`

// slackMessageRow is a scanned row of slackMessageColumns.
type slackMessageRow struct {
	ID        string `db:"id"`
	AccountID string `db:"account_id"`
	TaskID    string `db:"task_id"`
	Kind      string `db:"kind"`
	Channel   string `db:"channel"`
	Attempts  int    `db:"attempts"`
	ChannelID string `db:"channel_id"`
	TS        string `db:"ts"`
	// PostStartedAt is 0 for NULL.
	PostStartedAt int64 `db:"post_started_at"`
	// TraceParent is the trace context of the span that queued it.
	TraceParent string `db:"traceparent"`
}

func (r *slackMessageRow) message() *arbiter.SlackMessage {
	return &arbiter.SlackMessage{ID: r.ID, AccountID: r.AccountID, TaskID: r.TaskID, Kind: r.Kind, Channel: r.Channel,
		Attempts: r.Attempts, ChannelID: r.ChannelID, TS: r.TS, PostStartedAt: arbiter.Timestamp(r.PostStartedAt),
		TraceParent: r.TraceParent}
}

// ClaimSlackMessages leases up to max due messages to owner, oldest due
// first, in one statement (SKIP LOCKED on Postgres; the one writer on
// SQLite), and returns each with its connection, its task as it is now
// and, for an update, the task's posts.
func (d *DB) ClaimSlackMessages(ctx context.Context, owner string, max int, lease time.Duration) (_ []*arbiter.SlackDelivery, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if max <= 0 {
		return nil, nil
	}
	var rows []slackMessageRow
	if err := d.db.SelectContext(ctx, &rows, d.leaseDueSQL("slack_messages", slackMessageColumns),
		owner, lease.Milliseconds(), int64(d.nowMS()), max); err != nil {
		return nil, fmt.Errorf("claim Slack messages: %w", err)
	}
	out := make([]*arbiter.SlackDelivery, 0, len(rows))
	conns := map[string]*arbiter.SlackConnection{}
	for i := range rows {
		dl := &arbiter.SlackDelivery{Message: rows[i].message()}
		c, ok := conns[dl.Message.AccountID]
		if !ok {
			c, err = d.findSlackConnection(ctx, d.db, dl.Message.AccountID)
			if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				return nil, err
			}
			conns[dl.Message.AccountID] = c
		}
		dl.Connection = c
		dl.Task, err = d.findTask(ctx, nil, dl.Message.AccountID, dl.Message.TaskID)
		if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			return nil, err
		}
		if dl.Message.PostStartedAt != 0 {
			// Where to look for the post an unrecorded attempt may have made.
			err := d.db.GetContext(ctx, &dl.ChannelID, d.rebind(`SELECT channel_id FROM slack_channels
				WHERE account_id = ? AND channel = ?`), dl.Message.AccountID, dl.Message.Channel)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("find Slack channel: %w", err)
			}
		}
		if dl.Message.Kind == arbiter.SlackUpdate {
			var posts []struct {
				slackMessageRow
				Status string `db:"status"`
			}
			if err := d.db.SelectContext(ctx, &posts, d.rebind(`SELECT `+slackMessageColumns+`, status FROM slack_messages
				WHERE task_id = ? AND kind = ? AND channel = ? ORDER BY created_at, id`),
				dl.Message.TaskID, arbiter.SlackPost, dl.Message.Channel); err != nil {
				return nil, fmt.Errorf("find Slack posts: %w", err)
			}
			for j := range posts {
				switch posts[j].Status {
				case arbiter.SlackSent:
					dl.Posts = append(dl.Posts, posts[j].message())
				case arbiter.SlackPending:
					dl.PostsPending = true
				}
			}
		}
		out = append(out, dl)
	}
	return out, nil
}

// BeginSlackAttempt takes the turn of the message's channel, in the
// store so that every process shares it, as one upsert that takes it
// only when it is free (nobody holds it, or their hold lapsed, and its
// pause is over), on the database's clock; a post's attempt is recorded
// as begun in the same transaction. When the turn is not free it
// returns how long until its pause ends, or that another message holds
// it.
func (d *DB) BeginSlackAttempt(ctx context.Context, owner, id string, lease time.Duration) (pause time.Duration, held bool, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	err = d.transact(ctx, func(tx *Tx) error {
		var m struct {
			AccountID string `db:"account_id"`
			Channel   string `db:"channel"`
			Kind      string `db:"kind"`
		}
		if err := tx.GetContext(ctx, &m, d.rebind(`SELECT account_id, channel, kind FROM slack_messages
			WHERE id = ? AND lease_owner = ?`), id, owner); errors.Is(err, sql.ErrNoRows) {
			return errSlackLeaseLost
		} else if err != nil {
			return fmt.Errorf("find Slack message: %w", err)
		}
		taken, p, h, err := slackTurns.take(ctx, tx, m.AccountID, m.Channel, id, lease)
		if err != nil || !taken {
			pause, held = p, h
			return err
		}
		now := d.sqlNowMS()
		if m.Kind == arbiter.SlackPost {
			if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE slack_messages SET post_started_at = COALESCE(post_started_at, `+now+`)
				WHERE id = ?`), id); err != nil {
				return fmt.Errorf("record the Slack post's start: %w", err)
			}
		}
		return nil
	})
	return pause, held, err
}

// RecordSlackAttempt records the outcome of owner's attempt at the
// message, as arbiter.NextSlackAttempt rules, and ends its lease; a post
// settled (arbiter.SlackPostSettled) forgets its unrecorded start. The
// message's channel, when the attempt held its turn, is given back,
// quiet for r.Quiet, and learns the id Slack answered to a post.
func (d *DB) RecordSlackAttempt(ctx context.Context, owner, id string, r arbiter.SlackResult) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		var m struct {
			Attempts  int    `db:"attempts"`
			AccountID string `db:"account_id"`
			Channel   string `db:"channel"`
			Kind      string `db:"kind"`
		}
		if err := tx.GetContext(ctx, &m, d.rebind(`SELECT attempts, account_id, channel, kind FROM slack_messages
			WHERE id = ? AND lease_owner = ?`), id, owner); errors.Is(err, sql.ErrNoRows) {
			return errSlackLeaseLost
		} else if err != nil {
			return fmt.Errorf("find Slack message: %w", err)
		}
		status, counted, delay := arbiter.NextSlackAttempt(m.Attempts, r)
		now := d.nowMS()
		var sentAt sql.NullInt64
		if status == arbiter.SlackSent {
			sentAt = sql.NullInt64{Int64: int64(now), Valid: true}
		}
		settled := arbiter.SlackPostSettled(status, r)
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE slack_messages SET status = ?, attempts = ?, next_attempt_at = ?,
			lease_owner = NULL, lease_expires_at = NULL, last_error = ?, sent_at = COALESCE(?, sent_at),
			channel_id = CASE WHEN ? = '' THEN channel_id ELSE ? END, ts = CASE WHEN ? = '' THEN ts ELSE ? END,
			post_started_at = CASE WHEN ? THEN NULL ELSE post_started_at END
			WHERE id = ? AND lease_owner = ?`),
			status, counted, int64(now)+delay.Milliseconds(), truncate(r.Error, 500), sentAt,
			r.ChannelID, r.ChannelID, r.TS, r.TS, settled, id, owner); err != nil {
			return fmt.Errorf("record Slack attempt: %w", err)
		}
		learnt := ""
		if m.Kind == arbiter.SlackPost {
			learnt = r.ChannelID
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE slack_channels SET holder = NULL, held_until = NULL,
			next_at = `+d.sqlNowMS()+` + ?, channel_id = CASE WHEN ? = '' THEN channel_id ELSE ? END
			WHERE account_id = ? AND channel = ? AND holder = ?`),
			r.Quiet.Milliseconds(), learnt, learnt, m.AccountID, m.Channel, id); err != nil {
			return fmt.Errorf("give back the Slack channel's turn: %w", err)
		}
		return nil
	})
}

// FirstSlackRequest records the signature, forgetting those older than
// arbiter.SlackReplayWindow, and reports whether no process had recorded
// it before: an insert that does nothing on a conflict, in one
// transaction.
func (d *DB) FirstSlackRequest(ctx context.Context, signature string) (first bool, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM slack_replays WHERE seen_at < `+d.sqlNowMS()+` - ?`),
			arbiter.SlackReplayWindow.Milliseconds()); err != nil {
			return fmt.Errorf("forget old Slack signatures: %w", err)
		}
		res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO slack_replays (signature, seen_at) VALUES (?, `+d.sqlNowMS()+`)
			ON CONFLICT (signature) DO NOTHING`), signature)
		if err != nil {
			return fmt.Errorf("record the Slack signature: %w", err)
		}
		n, err := res.RowsAffected()
		first = n == 1
		return err
	})
	return first, err
}

// truncate returns s cut to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
