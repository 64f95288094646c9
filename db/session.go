package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.SessionService = (*DB)(nil)

// sessionSecretSetting names the row of settings that holds the cookie key.
const sessionSecretSetting = "session_secret"

// CreateSession starts a session for the person in their first account and
// records the sign-in in that account's audit log in the same transaction;
// expired and idle sessions are swept on the way. Returns ENOTFOUND for an unknown
// person and arbiter.ErrDemoSignIn for the demo account's address.
func (d *DB) CreateSession(ctx context.Context, personID, method string, client arbiter.Client) (_ *arbiter.Session, _ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	token := arbiter.NewSecretToken()
	now := d.nowMS()
	s := &arbiter.Session{
		ID:        arbiter.NewID("ses_", 8),
		PersonID:  personID,
		Method:    method,
		CreatedAt: now,
		ExpiresAt: now + arbiter.Timestamp(arbiter.SessionTTL.Milliseconds()),
	}
	err = d.transact(ctx, func(tx *Tx) error {
		p, err := d.findPerson(ctx, tx, "id", personID)
		if err != nil {
			return err
		}
		if err := arbiter.CheckSignInEmail(p.Email); err != nil {
			return err
		}
		s.Email = p.Email
		if s.Accounts, err = d.personMemberships(ctx, tx, p.ID); err != nil {
			return err
		}
		var accountID any
		if len(s.Accounts) > 0 {
			s.AccountID, s.AccountName, s.Role = s.Accounts[0].AccountID, s.Accounts[0].AccountName, s.Accounts[0].Role
			accountID = s.AccountID
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM sessions WHERE expires_at <= ? OR (last_seen_at <= ? AND created_at <= ?)`),
			int64(now), int64(now)-d.sessionIdle.Milliseconds(), int64(now)-d.sessionIdle.Milliseconds()); err != nil {
			return fmt.Errorf("sweep sessions: %w", err)
		}
		_, err = tx.ExecContext(ctx, d.rebind(`INSERT INTO sessions (id, hash, person_id, account_id, method, created_at, expires_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), s.ID, arbiter.HashToken(token), s.PersonID, accountID, s.Method, int64(s.CreatedAt), int64(s.ExpiresAt), int64(s.CreatedAt))
		if err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		if s.AccountID == "" {
			return nil
		}
		return d.insertAuditEvent(ctx, tx, &arbiter.AuditEvent{
			AccountID: s.AccountID, Kind: arbiter.AuditSignIn, Actor: p.Email, Detail: method,
			ClientIP: client.IP, UserAgent: client.UserAgent,
		})
	})
	if err != nil {
		return nil, "", err
	}
	return s, token, nil
}

// personMemberships returns the person's memberships, oldest first, the
// demo account's never.
func (d *DB) personMemberships(ctx context.Context, q sqlx.QueryerContext, personID string) ([]*arbiter.Membership, error) {
	rows, err := q.QueryContext(ctx, d.rebind(`SELECT m.account_id, a.email, m.person_id, p.email, m.role, m.created_at
		FROM memberships m JOIN people p ON p.id = m.person_id JOIN accounts a ON a.id = m.account_id
		WHERE m.person_id = ? AND m.account_id <> ?
		ORDER BY m.created_at, m.account_id LIMIT ?`), personID, arbiter.DemoAccountID, arbiter.MaxMemberships)
	if err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	return scanMemberships(rows)
}

var errSessionInvalid = arbiter.Errorf(arbiter.EUNAUTHORIZED, "Your session has ended; sign in again.")

// FindSessionByToken returns the live session with the token, or
// EUNAUTHORIZED, with its person's memberships read at this moment: a
// session whose account no longer has the person falls back to their first
// other account, or to none. A session of the demo account's address, which
// no sign-in may start, is never live. A session unused for the idle limit
// is deleted and refused; one in use has its last-seen time written when
// arbiter.SessionTouchDue says, at most once an hour, not on every request.
func (d *DB) FindSessionByToken(ctx context.Context, token string) (_ *arbiter.Session, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var (
		s        arbiter.Session
		account  sql.NullString
		lastSeen arbiter.Timestamp
	)
	now := d.nowMS()
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT s.id, s.person_id, p.email, s.account_id, s.method, s.created_at, s.expires_at, s.last_seen_at
		FROM sessions s JOIN people p ON p.id = s.person_id
		WHERE s.hash = ? AND s.expires_at > ?`), arbiter.HashToken(token), int64(now)).
		Scan(&s.ID, &s.PersonID, &s.Email, &account, &s.Method, &s.CreatedAt, &s.ExpiresAt, &lastSeen)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errSessionInvalid
		}
		return nil, fmt.Errorf("find session: %w", err)
	}
	noted := lastSeen
	// A session written by a release before last_seen_at (0) was last
	// seen, at the least, when it began.
	lastSeen = max(lastSeen, s.CreatedAt)
	if arbiter.SessionIdle(lastSeen, now, d.sessionIdle) {
		// Only if it is still idle: a request a moment ago may have used it.
		if _, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM sessions WHERE id = ? AND last_seen_at = ?`), s.ID, int64(noted)); err != nil {
			return nil, fmt.Errorf("delete idle session: %w", err)
		}
		return nil, errSessionInvalid
	}
	if arbiter.SessionTouchDue(lastSeen, now, d.sessionIdle) {
		if _, err := d.db.ExecContext(ctx, d.rebind(`UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?`),
			int64(now), s.ID, int64(now)); err != nil {
			return nil, fmt.Errorf("note the session's use: %w", err)
		}
	}
	if arbiter.CheckSignInEmail(s.Email) != nil {
		return nil, errSessionInvalid
	}
	if s.Accounts, err = d.personMemberships(ctx, d.db, s.PersonID); err != nil {
		return nil, err
	}
	current := -1
	for i, m := range s.Accounts {
		if m.AccountID == account.String {
			current = i
		}
	}
	if current < 0 && len(s.Accounts) > 0 {
		current = 0
	}
	if current >= 0 {
		m := s.Accounts[current]
		s.AccountID, s.AccountName, s.Role = m.AccountID, m.AccountName, m.Role
	}
	return &s, nil
}

// SwitchAccount makes the account the session's current one, when its
// person is a member of it.
func (d *DB) SwitchAccount(ctx context.Context, token, accountID string) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error {
		var personID string
		err := tx.QueryRowContext(ctx, d.rebind(`SELECT person_id FROM sessions WHERE hash = ? AND expires_at > ?`),
			arbiter.HashToken(token), int64(d.nowMS())).Scan(&personID)
		if errors.Is(err, sql.ErrNoRows) {
			return errSessionInvalid
		} else if err != nil {
			return fmt.Errorf("find session: %w", err)
		}
		role, err := d.roleIn(ctx, tx, accountID, personID)
		if err != nil {
			return err
		}
		if role == "" || accountID == arbiter.DemoAccountID {
			return arbiter.ErrNotAllowed
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE sessions SET account_id = ? WHERE hash = ?`), accountID, arbiter.HashToken(token)); err != nil {
			return fmt.Errorf("switch account: %w", err)
		}
		return nil
	})
}

// DeleteSession ends the session with the token, if there is one.
func (d *DB) DeleteSession(ctx context.Context, token string) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM sessions WHERE hash = ?`), arbiter.HashToken(token)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeletePersonSessions ends every session of the person.
func (d *DB) DeletePersonSessions(ctx context.Context, personID string) (_ int, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	res, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM sessions WHERE person_id = ?`), personID)
	if err != nil {
		return 0, fmt.Errorf("delete the person's sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete the person's sessions: %w", err)
	}
	return int(n), nil
}

// SessionSecret returns the stored cookie key, creating it on first use. Two
// processes starting at once agree: the first insert wins and both read it.
func (d *DB) SessionSecret(ctx context.Context) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var secret string
	err = d.transact(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO NOTHING`), sessionSecretSetting, arbiter.NewID("", 64))
		if err != nil {
			return fmt.Errorf("insert session secret: %w", err)
		}
		return tx.QueryRowContext(ctx, d.rebind(`SELECT value FROM settings WHERE name = ?`), sessionSecretSetting).Scan(&secret)
	})
	if err != nil {
		return "", fmt.Errorf("session secret: %w", err)
	}
	return strings.TrimSpace(secret), nil
}
