package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.IdentityService = (*DB)(nil)

// SignInWithIdentity returns the account of a known identity, or links a new
// identity to the account of its verified e-mail, creating the account when
// absent, in one transaction. Returns EUNAUTHORIZED for an identity that
// fails Validate, and arbiter.ErrDemoSignIn, linking nothing, for one that
// leads to the demo account.
func (d *DB) SignInWithIdentity(ctx context.Context, id arbiter.ExternalIdentity) (_ *arbiter.Account, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := id.Validate(); err != nil {
		return nil, err
	}
	email, _ := arbiter.NormalizeEmail(id.Email) // Validate checked it
	now := int64(d.nowMS())
	var a *arbiter.Account
	err = d.transact(ctx, func(tx *sqlx.Tx) error {
		var accountID string
		err := tx.QueryRowContext(ctx, d.rebind(`SELECT account_id FROM identities WHERE provider = ? AND subject = ?`),
			id.Provider, id.Subject).Scan(&accountID)
		switch {
		case err == nil:
			// A known identity keeps its account; its address is refreshed
			// for the record.
			if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE identities SET email = ? WHERE provider = ? AND subject = ?`),
				email, id.Provider, id.Subject); err != nil {
				return fmt.Errorf("update identity: %w", err)
			}
			if a, err = d.findAccount(ctx, tx, "id", accountID); err != nil {
				return err
			}
			return arbiter.CheckSignInAccount(a)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("find identity: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO accounts (id, email, created_at)
			VALUES (?, ?, ?) ON CONFLICT (email) DO NOTHING`), arbiter.NewAccountID(), email, now); err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		if a, err = d.findAccount(ctx, tx, "email", email); err != nil {
			return err
		}
		if err := arbiter.CheckSignInAccount(a); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO identities (id, account_id, provider, subject, email, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`), arbiter.NewID("idn_", 8), a.ID, id.Provider, id.Subject, email, now); err != nil {
			return fmt.Errorf("insert identity: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}
