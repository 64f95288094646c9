package db

import (
	"context"

	"github.com/arbiterhq/arbiter"
)

// InsertIdentityAndSession makes the account's address a person, a member
// of the account, links an identity to them and starts a session for them,
// directly in the tables, bypassing the sign-in rules, as a store written
// before those rules might hold them. It returns the session's token and
// the person's id.
func (d *DB) InsertIdentityAndSession(ctx context.Context, accountID, provider, subject string) (token, personID string, err error) {
	now := int64(d.nowMS())
	personID = arbiter.NewPersonID()
	if _, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO people (id, email, created_at)
		SELECT ?, email, ? FROM accounts WHERE id = ?`), personID, now, accountID); err != nil {
		return "", "", err
	}
	if _, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO memberships (account_id, person_id, role, created_at)
		VALUES (?, ?, ?, ?)`), accountID, personID, arbiter.RoleOwner, now); err != nil {
		return "", "", err
	}
	if _, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO identities (id, person_id, provider, subject, email, created_at)
		SELECT ?, id, ?, ?, email, ? FROM people WHERE id = ?`), arbiter.NewID("idn_", 8), provider, subject, now, personID); err != nil {
		return "", "", err
	}
	token = arbiter.NewSecretToken()
	_, err = d.db.ExecContext(ctx, d.rebind(`INSERT INTO sessions (id, hash, person_id, account_id, method, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`), arbiter.NewID("ses_", 8), arbiter.HashToken(token), personID, accountID, provider, now, now+arbiter.SessionTTL.Milliseconds())
	return token, personID, err
}

// Exec runs a statement written with ? placeholders, for tests that set up
// rows as an older release wrote them.
func (d *DB) Exec(ctx context.Context, query string, args ...any) error {
	_, err := d.db.ExecContext(ctx, d.rebind(query), args...)
	return err
}

// ExpireReservation makes the task's reservation run out now, as if its
// holder had left the desk long ago.
func (d *DB) ExpireReservation(ctx context.Context, taskID string) error {
	return d.Exec(ctx, `UPDATE task_states SET reserved_until = 1 WHERE id = ?`, taskID)
}
