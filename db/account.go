package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.AccountService = (*DB)(nil)

const accountColumns = `id, email, daily_cap, reservation_seconds, notify_after_minutes, gold_rate, created_at`

// FindOrCreateAccountByEmail returns the account with the e-mail, creating it
// when absent, with the person of that address as its owner. Returns
// EINVALID for a malformed address.
func (d *DB) FindOrCreateAccountByEmail(ctx context.Context, email string) (_ *arbiter.Account, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	email, err = arbiter.NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	var a *arbiter.Account
	err = d.transact(ctx, func(tx *Tx) error {
		now := int64(d.nowMS())
		res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO accounts (id, email, created_at)
			VALUES (?, ?, ?) ON CONFLICT (email) DO NOTHING`),
			arbiter.NewAccountID(), email, now)
		if err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		if a, err = d.findAccount(ctx, tx, "email", email); err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("insert account: %w", err)
		} else if n == 0 || a.ID == arbiter.DemoAccountID {
			return nil
		}
		// A new account's address is its first owner's.
		p, err := d.findOrCreatePerson(ctx, tx, email, now)
		if err != nil {
			return err
		}
		return d.insertMembership(ctx, tx, a.ID, p.ID, arbiter.RoleOwner, now)
	})
	return a, err
}

// FindAccountByEmail returns ENOTFOUND when no account has the e-mail.
func (d *DB) FindAccountByEmail(ctx context.Context, email string) (_ *arbiter.Account, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	email, err = arbiter.NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	return d.findAccount(ctx, d.db, "email", email)
}

// FindAccountByID returns ENOTFOUND for an unknown account.
func (d *DB) FindAccountByID(ctx context.Context, id string) (_ *arbiter.Account, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.findAccount(ctx, d.db, "id", id)
}

// SetReservationLength sets how long opening a task reserves it, when
// the actor may manage the account's settings.
func (d *DB) SetReservationLength(ctx context.Context, accountID string, length time.Duration, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := arbiter.CheckReservation(length); err != nil {
		return err
	}
	return d.setSetting(ctx, accountID, by, "reservation_seconds", int64(length/time.Second),
		fmt.Sprintf("reservations last %d minutes", int(length.Minutes())))
}

// SetNotifyAfter sets after how long a wait the account's reviewers are
// mailed, or turns it off, when the actor may manage settings.
func (d *DB) SetNotifyAfter(ctx context.Context, accountID string, after *time.Duration, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var minutes any
	detail := "reviewers are not e-mailed"
	if after != nil {
		if err := arbiter.CheckNotifyAfter(*after); err != nil {
			return err
		}
		minutes = int64(*after / time.Minute)
		detail = fmt.Sprintf("reviewers are e-mailed after a task waited %d minutes", minutes)
	}
	return d.setSetting(ctx, accountID, by, "notify_after_minutes", minutes, detail)
}

// SetGoldRate sets how often the desk serves a waiting gold task first
// (arbiter.GoldFirst), when the actor may manage settings.
func (d *DB) SetGoldRate(ctx context.Context, accountID string, rate float64, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := arbiter.CheckGoldRate(rate); err != nil {
		return err
	}
	return d.setSetting(ctx, accountID, by, "gold_rate", rate, fmt.Sprintf("gold tasks are served first at %g%%", rate*100))
}

// setSetting sets the account's column to value, when the actor may
// manage the account's settings, and audits the change as detail.
func (d *DB) setSetting(ctx context.Context, accountID string, by arbiter.Actor, column string, value any, detail string) error {
	return d.transact(ctx, func(tx *Tx) error {
		if _, err := d.findAccount(ctx, tx, "id", accountID); err != nil {
			return err
		}
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManageSettings); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE accounts SET `+column+` = ? WHERE id = ?`), value, accountID); err != nil {
			return fmt.Errorf("set %s: %w", column, err)
		}
		return d.insertAuditEvent(ctx, tx, memberAuditEvent(accountID, arbiter.AuditSettingsChanged, by, detail))
	})
}

// findAccount looks an account up by a unique column, "id" or "email".
func (d *DB) findAccount(ctx context.Context, q sqlx.QueryerContext, column, value string) (*arbiter.Account, error) {
	var (
		a       arbiter.Account
		cap     sql.NullInt64
		reserve int64
		notify  sql.NullInt64
	)
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT `+accountColumns+` FROM accounts WHERE `+column+` = ?`), value).
		Scan(&a.ID, &a.Email, &cap, &reserve, &notify, &a.GoldRate, &a.CreatedAt)
	a.ReservationLength = time.Duration(reserve) * time.Second
	if notify.Valid {
		n := time.Duration(notify.Int64) * time.Minute
		a.NotifyAfter = &n
	}
	if err != nil {
		return nil, notFound(err, "Account not found.")
	}
	if cap.Valid {
		n := int(cap.Int64)
		a.DailyCap = &n
	}
	return &a, nil
}

// SetDailyCap sets the account's own daily cap; nil returns it to the default.
// Returns EINVALID for a cap arbiter.CheckDailyCap refuses and ENOTFOUND for
// an unknown account.
func (d *DB) SetDailyCap(ctx context.Context, accountID string, cap *int) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if cap != nil {
		if err := arbiter.CheckDailyCap(*cap); err != nil {
			return err
		}
	}
	res, err := d.db.ExecContext(ctx, d.rebind(`UPDATE accounts SET daily_cap = ? WHERE id = ?`), cap, accountID)
	if err != nil {
		return fmt.Errorf("set daily cap: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set daily cap: %w", err)
	} else if n == 0 {
		return arbiter.Errorf(arbiter.ENOTFOUND, "Account not found.")
	}
	return nil
}

// UsageToday returns the account's task count for the current UTC day and
// its effective cap.
func (d *DB) UsageToday(ctx context.Context, accountID string) (used, cap int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	day := int64(d.nowMS()) / msPerDay
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT
		COALESCE((SELECT count FROM daily_usage WHERE account_id = ? AND day = ?), 0),
		COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?)`),
		accountID, day, accountID, d.cap).Scan(&used, &cap)
	if err != nil {
		return 0, 0, fmt.Errorf("usage today: %w", err)
	}
	return used, cap, nil
}
