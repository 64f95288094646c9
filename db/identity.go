package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.IdentityService = (*DB)(nil)

// SignInWithIdentity returns the person of a known identity, or links a new
// identity to the person of its verified e-mail, creating the person when
// absent, in one transaction. A person who is a member of no account and
// has no pending invitation gets an account of their own, as its owner.
// Returns EUNAUTHORIZED for an identity that fails Validate or whose
// address arbiter.CheckEmailDomain refuses, and
// arbiter.ErrDemoSignIn, linking nothing, for one that leads to the demo
// account.
func (d *DB) SignInWithIdentity(ctx context.Context, id arbiter.ExternalIdentity) (_ *arbiter.Person, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := id.Validate(); err != nil {
		return nil, err
	}
	email, _ := arbiter.NormalizeEmail(id.Email) // Validate checked it
	if err := arbiter.CheckEmailDomain(email, d.allowDotlessEmail); err != nil {
		return nil, arbiter.Errorf(arbiter.EUNAUTHORIZED, "The identity provider vouched for %s: %s", email, arbiter.ErrorMessage(err))
	}
	now := int64(d.nowMS())
	var p *arbiter.Person
	err = d.transact(ctx, func(tx *Tx) error {
		var personID string
		err := tx.QueryRowContext(ctx, d.rebind(`SELECT person_id FROM identities WHERE provider = ? AND subject = ?`),
			id.Provider, id.Subject).Scan(&personID)
		switch {
		case err == nil:
			// A known identity keeps its person; its address is refreshed
			// for the record.
			if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE identities SET email = ? WHERE provider = ? AND subject = ?`),
				email, id.Provider, id.Subject); err != nil {
				return fmt.Errorf("update identity: %w", err)
			}
			if p, err = d.findPerson(ctx, tx, "id", personID); err != nil {
				return err
			}
			if err := arbiter.CheckSignInEmail(p.Email); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("find identity: %w", err)
		default:
			if p, err = d.findOrCreatePerson(ctx, tx, email, now); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO identities (id, person_id, provider, subject, email, created_at)
				VALUES (?, ?, ?, ?, ?, ?)`), arbiter.NewID("idn_", 8), p.ID, id.Provider, id.Subject, email, now); err != nil {
				return fmt.Errorf("insert identity: %w", err)
			}
		}
		return d.ensureAccount(ctx, tx, p, now)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ensureAccount gives a person who is a member of no account, and whom no
// pending invitation awaits, an account of their own named by their
// address, unless an account of that name exists already (they were
// removed from it): then they are a member of nothing until invited.
func (d *DB) ensureAccount(ctx context.Context, tx *Tx, p *arbiter.Person, now int64) error {
	var memberships, invitations int
	err := tx.QueryRowContext(ctx, d.rebind(`SELECT
		(SELECT count(*) FROM memberships WHERE person_id = ? AND account_id <> ?),
		(SELECT count(*) FROM invitations WHERE email = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?)`),
		p.ID, arbiter.DemoAccountID, p.Email, now).Scan(&memberships, &invitations)
	if err != nil {
		return fmt.Errorf("count memberships: %w", err)
	}
	if memberships > 0 || invitations > 0 {
		return nil
	}
	accountID := arbiter.NewAccountID()
	res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO accounts (id, email, created_at)
		VALUES (?, ?, ?) ON CONFLICT (email) DO NOTHING`), accountID, p.Email, now)
	if err != nil {
		return fmt.Errorf("insert account: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("insert account: %w", err)
	} else if n == 0 {
		return nil
	}
	return d.insertMembership(ctx, tx, accountID, p.ID, arbiter.RoleOwner, now)
}
