package db

import (
	"context"

	"github.com/arbiterhq/arbiter"
)

// InsertIdentityAndSession links an identity to the account and starts a
// session for it directly in the tables, bypassing the sign-in rules, as a
// store written before those rules might hold them. It returns the
// session's token.
func (d *DB) InsertIdentityAndSession(ctx context.Context, accountID, provider, subject string) (string, error) {
	now := int64(d.nowMS())
	if _, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO identities (id, account_id, provider, subject, email, created_at)
		SELECT ?, id, ?, ?, email, ? FROM accounts WHERE id = ?`), arbiter.NewID("idn_", 8), provider, subject, now, accountID); err != nil {
		return "", err
	}
	token := arbiter.NewSecretToken()
	_, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO sessions (id, hash, account_id, method, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`), arbiter.NewID("ses_", 8), arbiter.HashToken(token), accountID, provider, now, now+arbiter.SessionTTL.Milliseconds())
	return token, err
}
