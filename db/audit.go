package db

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.AuditService = (*DB)(nil)

// RecordAuditEvent appends an event to its account's log; the user agent is
// cut to arbiter.MaxUserAgentChars.
func (d *DB) RecordAuditEvent(ctx context.Context, e *arbiter.AuditEvent) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	return d.transact(ctx, func(tx *Tx) error { return d.insertAuditEvent(ctx, tx, e) })
}

// insertAuditEvent writes e inside tx and fills in its id and time.
func (d *DB) insertAuditEvent(ctx context.Context, tx *Tx, e *arbiter.AuditEvent) error {
	e.CreatedAt = d.nowMS()
	e.UserAgent = truncateRunes(strings.ToValidUTF8(e.UserAgent, ""), arbiter.MaxUserAgentChars)
	err := tx.QueryRowContext(ctx, d.rebind(`INSERT INTO audit_events
		(account_id, kind, actor, detail, client_ip, user_agent, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		e.AccountID, e.Kind, e.Actor, e.Detail, e.ClientIP, e.UserAgent, int64(e.CreatedAt)).Scan(&e.ID)
	if err != nil {
		return fmt.Errorf("insert audit event: %w", err)
	}
	return nil
}

// ListAuditEvents returns the account's latest events, newest first, from
// the read pool (readPool).
func (d *DB) ListAuditEvents(ctx context.Context, accountID string, limit int) (_ []*arbiter.AuditEvent, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.readPool().QueryContext(ctx, d.rebind(`SELECT id, account_id, kind, actor, detail, client_ip, user_agent, created_at
		FROM audit_events WHERE account_id = ? ORDER BY id DESC LIMIT ?`), accountID, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	defer rows.Close()
	events := []*arbiter.AuditEvent{}
	for rows.Next() {
		var e arbiter.AuditEvent
		if err := rows.Scan(&e.ID, &e.AccountID, &e.Kind, &e.Actor, &e.Detail, &e.ClientIP, &e.UserAgent, &e.CreatedAt); err != nil {
			return nil, fmt.Errorf("scan audit event: %w", err)
		}
		events = append(events, &e)
	}
	return events, rows.Err()
}

// truncateRunes cuts s to at most n characters.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
