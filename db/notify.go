package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.NotificationService = (*DB)(nil)

// ClaimDigests finds the reviewers due a digest and claims each by
// inserting its (account, person, hour) row, in one transaction: a row
// another worker inserted first is a digest this call does not return.
func (d *DB) ClaimDigests(ctx context.Context, max int) (_ []arbiter.Digest, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	now := d.nowMS()
	hour := arbiter.DigestHour(now)
	var claimed []arbiter.Digest
	err = d.transact(ctx, func(tx *Tx) error {
		// The accounts that mail reviewers, with their queue: how many wait
		// (counted on the human queue's index) and since when the oldest
		// has; the oldest by creation stands for the longest waiting.
		rows, err := tx.QueryContext(ctx, d.rebind(`SELECT a.id, a.email, a.notify_after_minutes,
			(SELECT count(*) FROM tasks t WHERE t.account_id = a.id AND t.status = 'human_needed'),
			(SELECT `+wentToHuman+` FROM tasks t WHERE t.account_id = a.id AND t.status = 'human_needed'
				ORDER BY t.created_at, t.id LIMIT 1)
			FROM accounts a WHERE a.notify_after_minutes IS NOT NULL ORDER BY a.id`))
		if err != nil {
			return fmt.Errorf("find accounts due: %w", err)
		}
		type due struct {
			id, name        string
			waiting, oldest int64
		}
		var accounts []due
		for rows.Next() {
			var a due
			var minutes int64
			var oldest sql.NullInt64
			if err := rows.Scan(&a.id, &a.name, &minutes, &a.waiting, &oldest); err != nil {
				rows.Close()
				return fmt.Errorf("scan account due: %w", err)
			}
			a.oldest = oldest.Int64
			if a.waiting > 0 && oldest.Valid && a.oldest <= int64(now)-minutes*60_000 {
				accounts = append(accounts, a)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find accounts due: %w", err)
		}
		for _, a := range accounts {
			members, err := d.membersOf(ctx, tx, a.id)
			if err != nil {
				return err
			}
			var oldest []*arbiter.Task
			for _, m := range members {
				if len(claimed) == max {
					return nil
				}
				if !arbiter.Can(m.Role, arbiter.ActionReview) {
					continue
				}
				res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO digests (account_id, person_id, hour, claimed_at)
					VALUES (?, ?, ?, ?) ON CONFLICT (account_id, person_id, hour) DO NOTHING`), a.id, m.PersonID, hour, int64(now))
				if err != nil {
					return fmt.Errorf("claim digest: %w", err)
				}
				if n, err := res.RowsAffected(); err != nil {
					return fmt.Errorf("claim digest: %w", err)
				} else if n == 1 {
					// The oldest tasks, with this person's decision links.
					if oldest == nil {
						if oldest, err = d.oldestWaiting(ctx, tx, a.id); err != nil {
							return err
						}
					}
					tasks, err := d.insertDecisionLinks(ctx, tx, a.id, m.PersonID, oldest, now)
					if err != nil {
						return err
					}
					claimed = append(claimed, arbiter.Digest{AccountID: a.id, AccountName: a.name, PersonID: m.PersonID,
						Email: m.Email, Waiting: int(a.waiting), Oldest: time.Duration(int64(now)-a.oldest) * time.Millisecond,
						Tasks: tasks})
				}
			}
		}
		// Claims of past hours are of no more use.
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM digests WHERE hour < ?`), hour-1); err != nil {
			return fmt.Errorf("sweep digests: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// membersOf returns the account's members, inside tx.
func (d *DB) membersOf(ctx context.Context, tx *Tx, accountID string) ([]*arbiter.Membership, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT m.account_id, a.email, m.person_id, p.email, m.role, m.created_at
		FROM memberships m JOIN people p ON p.id = m.person_id JOIN accounts a ON a.id = m.account_id
		WHERE m.account_id = ? ORDER BY p.email LIMIT ?`), accountID, arbiter.MaxMemberships)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return scanMemberships(rows)
}
