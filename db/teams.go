package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.TeamsService = (*DB)(nil)

// Microsoft Teams: an account's bot and the conversations it was added to
// (arbiter's teams.go). The Teams outbox is outbox_teams.go, its delivery
// teams_messages.go.

// teamsDisconnectDeletes forget what an account's bot leaves behind when
// it is disconnected.
var teamsDisconnectDeletes = []string{
	`DELETE FROM teams_conversations WHERE account_id = ?`,
	`DELETE FROM teams_messages WHERE account_id = ? AND status = 'pending'`,
}

var errTeamsNotConnected = arbiter.Errorf(arbiter.ENOTFOUND, "Microsoft Teams is not connected to this account.")

const teamsConnectionColumns = `account_id, app_id, client_secret, tenant_id, default_conversation, created_at`

// teamsConnectionRow is a scanned row of teamsConnectionColumns.
type teamsConnectionRow struct {
	AccountID           string `db:"account_id"`
	AppID               string `db:"app_id"`
	ClientSecret        string `db:"client_secret"`
	TenantID            string `db:"tenant_id"`
	DefaultConversation string `db:"default_conversation"`
	CreatedAt           int64  `db:"created_at"`
}

// teamsConnectionOf returns the row's connection, its secret opened.
func (d *DB) teamsConnectionOf(r *teamsConnectionRow) (*arbiter.TeamsConnection, error) {
	secret, err := d.secrets.Open(r.ClientSecret, r.AccountID)
	if err != nil {
		return nil, fmt.Errorf("open the Teams connection of account %s: %w", r.AccountID, err)
	}
	return &arbiter.TeamsConnection{AccountID: r.AccountID, AppID: r.AppID, ClientSecret: secret, TenantID: r.TenantID,
		DefaultConversation: r.DefaultConversation, CreatedAt: arbiter.Timestamp(r.CreatedAt)}, nil
}

// ConnectTeams stores the account's bot, its secret sealed, replacing
// any, with its line in the audit log, in one transaction. A new bot
// forgets the old one's conversations (they were another bot's).
func (d *DB) ConnectTeams(ctx context.Context, accountID string, in arbiter.TeamsConnectionInput, by arbiter.Actor) (_ *arbiter.TeamsConnection, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if d.secrets == nil {
		return nil, arbiter.ErrTeamsNeedsKey
	}
	sealed, err := d.seal(in.ClientSecret, accountID)
	if err != nil {
		return nil, err
	}
	c := &arbiter.TeamsConnection{AccountID: accountID, AppID: in.AppID, ClientSecret: in.ClientSecret, TenantID: in.TenantID}
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageSettings); err != nil {
			return err
		}
		var owner string
		err := tx.GetContext(ctx, &owner, d.rebind(`SELECT account_id FROM teams_connections WHERE app_id = ?`), in.AppID)
		switch {
		case err == nil && owner != accountID:
			return arbiter.ErrTeamsAppTaken
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("find the bot's account: %w", err)
		}
		var old teamsConnectionRow
		err = tx.GetContext(ctx, &old, d.rebind(`SELECT `+teamsConnectionColumns+` FROM teams_connections WHERE account_id = ?`), accountID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("find the Teams connection: %w", err)
		}
		if err == nil && old.AppID == in.AppID {
			c.DefaultConversation = old.DefaultConversation
		} else if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM teams_conversations WHERE account_id = ?`), accountID); err != nil {
			return fmt.Errorf("forget the old bot's conversations: %w", err)
		}
		c.CreatedAt = tx.now
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO teams_connections (`+teamsConnectionColumns+`)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id) DO UPDATE SET app_id = excluded.app_id, client_secret = excluded.client_secret,
				tenant_id = excluded.tenant_id, default_conversation = excluded.default_conversation, created_at = excluded.created_at`),
			accountID, c.AppID, sealed, c.TenantID, c.DefaultConversation, int64(c.CreatedAt)); err != nil {
			return fmt.Errorf("store Teams connection: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewTeamsAuditEvent(arbiter.AuditTeamsConnected, accountID, c, by))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DisconnectTeams forgets the account's bot, its conversations and its
// unsent messages, with its line in the audit log, in one transaction.
func (d *DB) DisconnectTeams(ctx context.Context, accountID string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageSettings); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM teams_connections WHERE account_id = ?`), accountID)
		if err != nil {
			return fmt.Errorf("delete Teams connection: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errTeamsNotConnected
		}
		for _, q := range teamsDisconnectDeletes {
			if _, err := tx.ExecContext(ctx, d.rebind(q), accountID); err != nil {
				return fmt.Errorf("forget the Teams connection's rows: %w", err)
			}
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewTeamsAuditEvent(arbiter.AuditTeamsDisconnected, accountID, nil, by))
	})
}

// FindTeamsConnection returns the account's bot, or ENOTFOUND.
func (d *DB) FindTeamsConnection(ctx context.Context, accountID string) (_ *arbiter.TeamsConnection, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.findTeamsConnection(ctx, "account_id", accountID)
}

// FindTeamsConnectionByApp returns the connection of the bot, or
// ENOTFOUND.
func (d *DB) FindTeamsConnectionByApp(ctx context.Context, appID string) (_ *arbiter.TeamsConnection, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.findTeamsConnection(ctx, "app_id", appID)
}

// findTeamsConnection returns the connection whose column (account_id or
// app_id) is value.
func (d *DB) findTeamsConnection(ctx context.Context, column, value string) (*arbiter.TeamsConnection, error) {
	var r teamsConnectionRow
	if err := d.db.GetContext(ctx, &r, d.rebind(`SELECT `+teamsConnectionColumns+` FROM teams_connections
		WHERE `+column+` = ?`), value); err != nil {
		return nil, notFound(err, errTeamsNotConnected.Message)
	}
	return d.teamsConnectionOf(&r)
}

// SetTeamsDefault sets the conversation questions go to, with its line in
// the audit log.
func (d *DB) SetTeamsDefault(ctx context.Context, accountID, name string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageSettings); err != nil {
			return err
		}
		if name != "" {
			var n int
			if err := tx.GetContext(ctx, &n, d.rebind(`SELECT COUNT(*) FROM teams_conversations WHERE account_id = ? AND name = ?`),
				accountID, name); err != nil {
				return fmt.Errorf("find the Teams conversation: %w", err)
			}
			if n == 0 {
				return arbiter.Errorf(arbiter.ENOTFOUND, "The bot is in no conversation named %s.", name)
			}
		}
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE teams_connections SET default_conversation = ? WHERE account_id = ?`), name, accountID)
		if err != nil {
			return fmt.Errorf("set the Teams conversation: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errTeamsNotConnected
		}
		var r teamsConnectionRow
		if err := tx.GetContext(ctx, &r, d.rebind(`SELECT `+teamsConnectionColumns+` FROM teams_connections WHERE account_id = ?`), accountID); err != nil {
			return fmt.Errorf("find the Teams connection: %w", err)
		}
		c := &arbiter.TeamsConnection{AccountID: accountID, AppID: r.AppID, TenantID: r.TenantID, DefaultConversation: name}
		return d.insertAuditEvent(ctx, tx, arbiter.NewTeamsAuditEvent(arbiter.AuditTeamsDefault, accountID, c, by))
	})
}

const teamsConversationColumns = `account_id, id, name, kind, title, service_url, added_at`

// teamsConversationRow is a scanned row of teamsConversationColumns.
type teamsConversationRow struct {
	AccountID  string `db:"account_id"`
	ID         string `db:"id"`
	Name       string `db:"name"`
	Kind       string `db:"kind"`
	Title      string `db:"title"`
	ServiceURL string `db:"service_url"`
	AddedAt    int64  `db:"added_at"`
}

func (r *teamsConversationRow) conversation() *arbiter.TeamsConversation {
	return &arbiter.TeamsConversation{AccountID: r.AccountID, ID: r.ID, Name: r.Name, Kind: r.Kind, Title: r.Title,
		ServiceURL: r.ServiceURL, AddedAt: arbiter.Timestamp(r.AddedAt)}
}

// maxTeamsConversations bounds the conversations an account's bot keeps:
// a bot added to more is refused the rest (a conversationUpdate cannot
// grow the store without bound).
const maxTeamsConversations = 500

// SaveTeamsConversation stores or updates the conversation; a new one
// whose name another has gets "-2", "-3"… (up to the tenth, then its id's
// last characters).
func (d *DB) SaveTeamsConversation(ctx context.Context, c *arbiter.TeamsConversation) (_ *arbiter.TeamsConversation, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	saved := *c
	err = d.transact(ctx, func(tx *Tx) error {
		var r teamsConversationRow
		err := tx.GetContext(ctx, &r, d.rebind(`SELECT `+teamsConversationColumns+` FROM teams_conversations
			WHERE account_id = ? AND id = ?`), c.AccountID, c.ID)
		if err == nil {
			// Known: keep its name, which targets use; follow its service
			// URL and title.
			saved.Name, saved.AddedAt = r.Name, arbiter.Timestamp(r.AddedAt)
			_, err = tx.ExecContext(ctx, d.rebind(`UPDATE teams_conversations SET service_url = ?, title = ?, kind = ?
				WHERE account_id = ? AND id = ?`), c.ServiceURL, c.Title, c.Kind, c.AccountID, c.ID)
			return err
		} else if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("find the Teams conversation: %w", err)
		}
		var names []string
		if err := tx.SelectContext(ctx, &names, d.rebind(`SELECT name FROM teams_conversations WHERE account_id = ?`), c.AccountID); err != nil {
			return fmt.Errorf("find the Teams conversations: %w", err)
		}
		if len(names) >= maxTeamsConversations {
			return arbiter.Errorf(arbiter.ECONFLICT, "The bot is in %d conversations of this account already, the most Arbiter keeps.", maxTeamsConversations)
		}
		saved.Name = uniqueName(c.Name, c.ID, names)
		saved.AddedAt = tx.now
		_, err = tx.ExecContext(ctx, d.rebind(`INSERT INTO teams_conversations (`+teamsConversationColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?)`), c.AccountID, c.ID, saved.Name, c.Kind, c.Title, c.ServiceURL, int64(saved.AddedAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("save Teams conversation: %w", err)
	}
	return &saved, nil
}

// uniqueName returns name, or name with a suffix no name in taken has.
func uniqueName(name, id string, taken []string) string {
	has := func(n string) bool {
		for _, t := range taken {
			if t == n {
				return true
			}
		}
		return false
	}
	if !has(name) {
		return name
	}
	for i := 2; i <= 10; i++ {
		if n := name + "-" + strconv.Itoa(i); !has(n) {
			return n
		}
	}
	tail := arbiter.TeamsConversationName(arbiter.TeamsGroupChat, "", id, "")
	return name + "-" + tail[max(0, len(tail)-8):]
}

// RemoveTeamsConversation forgets the conversation.
func (d *DB) RemoveTeamsConversation(ctx context.Context, accountID, conversationID string) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM teams_conversations WHERE account_id = ? AND id = ?`),
		accountID, conversationID); err != nil {
		return fmt.Errorf("forget Teams conversation: %w", err)
	}
	return nil
}

// ListTeamsConversations returns the account's conversations by name.
func (d *DB) ListTeamsConversations(ctx context.Context, accountID string) (_ []*arbiter.TeamsConversation, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var rows []teamsConversationRow
	if err := d.db.SelectContext(ctx, &rows, d.rebind(`SELECT `+teamsConversationColumns+` FROM teams_conversations
		WHERE account_id = ? ORDER BY name`), accountID); err != nil {
		return nil, fmt.Errorf("list Teams conversations: %w", err)
	}
	out := make([]*arbiter.TeamsConversation, len(rows))
	for i := range rows {
		out[i] = rows[i].conversation()
	}
	return out, nil
}

// TeamsDeciders returns the Teams ids of the account's reviewers whose
// Teams user (of the bot appID) is linked to them, the latest linked
// first, at most arbiter.MaxTeamsDeciders.
func (d *DB) TeamsDeciders(ctx context.Context, accountID, appID string) (_ []string, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.teamsDeciders(ctx, accountID, appID)
}

func (d *DB) teamsDeciders(ctx context.Context, accountID, appID string) ([]string, error) {
	var rows []struct {
		UserID string `db:"user_id"`
		Role   string `db:"role"`
	}
	if err := d.db.SelectContext(ctx, &rows, d.rebind(`SELECT l.user_id, m.role FROM chat_links l
		JOIN memberships m ON m.person_id = l.person_id AND m.account_id = ?
		WHERE l.provider = ? AND l.workspace = ? ORDER BY l.linked_at DESC, l.user_id LIMIT 1000`),
		accountID, arbiter.ChatTeams, appID); err != nil {
		return nil, fmt.Errorf("find the Teams deciders: %w", err)
	}
	var out []string
	for _, r := range rows {
		if arbiter.Can(r.Role, arbiter.ActionReview) && len(out) < arbiter.MaxTeamsDeciders {
			out = append(out, r.UserID)
		}
	}
	return out, nil
}
