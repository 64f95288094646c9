package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.NotificationService = (*DB)(nil)

// ClaimDigests finds the reviewers due a digest, claims each by inserting
// its (account, person, hour) row, and queues it in the mail outbox, in
// one transaction: a row another worker inserted first is a digest this
// call does not queue.
func (d *DB) ClaimDigests(ctx context.Context, max int) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var queued int
	err = d.transact(ctx, func(tx *Tx) error {
		queued = 0
		accounts, err := d.accountsDueDigests(ctx, tx)
		if err != nil {
			return err
		}
		var digests []arbiter.Digest
		for _, a := range accounts {
			if len(digests) == max {
				break
			}
			claimed, err := d.claimDigestsOf(ctx, tx, a, max-len(digests))
			if err != nil {
				return err
			}
			digests = append(digests, claimed...)
		}
		// Claims of past hours are of no more use.
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM digests WHERE hour < ?`), arbiter.DigestHour(tx.now)-1); err != nil {
			return fmt.Errorf("sweep digests: %w", err)
		}
		msgs := make([]*arbiter.MailMessage, len(digests))
		for i, dg := range digests {
			if msgs[i], err = arbiter.NewMail(arbiter.MailDigest, dg.AccountID, dg.Email, "", dg); err != nil {
				return err
			}
		}
		queued = len(msgs)
		return outboxOf[*mailOutbox](d).write(ctx, tx, msgs)
	})
	if err != nil {
		return 0, err
	}
	return queued, nil
}

// digestAccount is an account whose reviewers are due a digest: how many
// of its tasks wait for a person, and since when the oldest has.
type digestAccount struct {
	id, name        string
	waiting, oldest int64
}

// accountsDueDigests returns, inside tx, the accounts that mail reviewers
// and whose oldest waiting task has waited their minutes, with their
// queue: how many wait (counted on the human queue's index) and since
// when the oldest has; the oldest by creation stands for the longest
// waiting.
func (d *DB) accountsDueDigests(ctx context.Context, tx *Tx) ([]digestAccount, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT a.id, a.email, a.notify_after_minutes,
		(SELECT count(*) FROM tasks t WHERE t.account_id = a.id AND t.status = 'human_needed'),
		(SELECT `+wentToHuman+` FROM tasks t WHERE t.account_id = a.id AND t.status = 'human_needed'
			ORDER BY t.created_at, t.id LIMIT 1)
		FROM accounts a WHERE a.notify_after_minutes IS NOT NULL ORDER BY a.id`))
	if err != nil {
		return nil, fmt.Errorf("find accounts due: %w", err)
	}
	defer rows.Close()
	var accounts []digestAccount
	for rows.Next() {
		var a digestAccount
		var minutes int64
		var oldest sql.NullInt64
		if err := rows.Scan(&a.id, &a.name, &minutes, &a.waiting, &oldest); err != nil {
			return nil, fmt.Errorf("scan account due: %w", err)
		}
		a.oldest = oldest.Int64
		if a.waiting > 0 && oldest.Valid && a.oldest <= int64(tx.now)-minutes*60_000 {
			accounts = append(accounts, a)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find accounts due: %w", err)
	}
	return accounts, nil
}

// claimDigestsOf claims, inside tx, the digests of the hour of the
// account's members who may review, at most max, and returns those it
// claimed, each with the oldest waiting tasks and the member's decision
// links to them.
func (d *DB) claimDigestsOf(ctx context.Context, tx *Tx, a digestAccount, max int) ([]arbiter.Digest, error) {
	members, err := d.membersOf(ctx, tx, a.id)
	if err != nil {
		return nil, err
	}
	now, hour := tx.now, arbiter.DigestHour(tx.now)
	var claimed []arbiter.Digest
	var oldest []*arbiter.Task
	for _, m := range members {
		if len(claimed) == max {
			break
		}
		if !arbiter.Can(m.Role, arbiter.ActionReview) {
			continue
		}
		res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO digests (account_id, person_id, hour, claimed_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (account_id, person_id, hour) DO NOTHING`), a.id, m.PersonID, hour, int64(now))
		if err != nil {
			return nil, fmt.Errorf("claim digest: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("claim digest: %w", err)
		} else if n == 0 {
			continue // another worker claimed it
		}
		// The oldest tasks, with this person's decision links.
		if oldest == nil {
			if oldest, err = d.oldestWaiting(ctx, tx, a.id); err != nil {
				return nil, err
			}
		}
		tasks, err := d.insertDecisionLinks(ctx, tx, a.id, m.PersonID, oldest, now)
		if err != nil {
			return nil, err
		}
		claimed = append(claimed, arbiter.Digest{AccountID: a.id, AccountName: a.name, PersonID: m.PersonID,
			Email: m.Email, Waiting: int(a.waiting), Oldest: time.Duration(int64(now)-a.oldest) * time.Millisecond, Tasks: tasks})
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
