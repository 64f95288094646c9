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

// CreateSession starts a session and records the sign-in in the account's
// audit log in the same transaction; expired sessions are swept on the way.
// Returns ENOTFOUND for an unknown account and arbiter.ErrDemoSignIn for the
// demo account.
func (d *DB) CreateSession(ctx context.Context, accountID, method string, client arbiter.Client) (_ *arbiter.Session, _ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	token := arbiter.NewSecretToken()
	now := d.nowMS()
	s := &arbiter.Session{
		ID:        arbiter.NewID("ses_", 8),
		AccountID: accountID,
		Method:    method,
		CreatedAt: now,
		ExpiresAt: now + arbiter.Timestamp(arbiter.SessionTTL.Milliseconds()),
	}
	err = d.transact(ctx, func(tx *sqlx.Tx) error {
		a, err := d.findAccount(ctx, tx, "id", accountID)
		if err != nil {
			return err
		}
		if err := arbiter.CheckSignInAccount(a); err != nil {
			return err
		}
		s.Email = a.Email
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM sessions WHERE expires_at <= ?`), int64(now)); err != nil {
			return fmt.Errorf("sweep sessions: %w", err)
		}
		_, err = tx.ExecContext(ctx, d.rebind(`INSERT INTO sessions (id, hash, account_id, method, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`), s.ID, arbiter.HashToken(token), s.AccountID, s.Method, int64(s.CreatedAt), int64(s.ExpiresAt))
		if err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		return d.insertAuditEvent(ctx, tx, &arbiter.AuditEvent{
			AccountID: accountID, Kind: arbiter.AuditSignIn, Actor: a.Email, Detail: method,
			ClientIP: client.IP, UserAgent: client.UserAgent,
		})
	})
	if err != nil {
		return nil, "", err
	}
	return s, token, nil
}

var errSessionInvalid = arbiter.Errorf(arbiter.EUNAUTHORIZED, "Your session has ended; sign in again.")

// FindSessionByToken returns the live session with the token, or
// EUNAUTHORIZED; a session of the demo account, which no sign-in may start,
// is never live.
func (d *DB) FindSessionByToken(ctx context.Context, token string) (_ *arbiter.Session, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var s arbiter.Session
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT s.id, s.account_id, a.email, s.method, s.created_at, s.expires_at
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.hash = ? AND s.expires_at > ? AND s.account_id <> ?`), arbiter.HashToken(token), int64(d.nowMS()), arbiter.DemoAccountID).
		Scan(&s.ID, &s.AccountID, &s.Email, &s.Method, &s.CreatedAt, &s.ExpiresAt)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errSessionInvalid
		}
		return nil, fmt.Errorf("find session: %w", err)
	}
	return &s, nil
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

// SessionSecret returns the stored cookie key, creating it on first use. Two
// processes starting at once agree: the first insert wins and both read it.
func (d *DB) SessionSecret(ctx context.Context) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var secret string
	err = d.transact(ctx, func(tx *sqlx.Tx) error {
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
