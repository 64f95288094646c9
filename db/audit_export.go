package db

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.AuditExportService = (*DB)(nil)

// exportPage is how many decisions or events an export reads at once.
const exportPage = 500

// ExportAudit writes the account's audit export (arbiter.VerifyAuditExport
// says what it holds): the decisions of its receipt chain and the events
// of its audit log from since on, merged oldest first, up to the last of
// each that existed when it began, each page read on its own so that no
// transaction stays open while the export is written; then the end line,
// signed by the key that signs receipts now.
func (d *DB) ExportAudit(ctx context.Context, accountID string, since arbiter.Timestamp, w io.Writer) (err error) {
	var key arbiter.ReceiptKey
	if err := d.transact(ctx, func(tx *Tx) error {
		key, err = d.signingKey(ctx, tx)
		return err
	}); err != nil {
		return err
	}
	keys, err := d.publicReceiptKeys(ctx, d.db)
	if err != nil {
		return err
	}
	var lastSeq, lastEvent int64
	if err := d.db.QueryRowContext(ctx, d.rebind(`SELECT
		COALESCE((SELECT max(seq) FROM receipts WHERE account_id = ?), 0),
		COALESCE((SELECT max(id) FROM audit_events WHERE account_id = ?), 0)`), accountID, accountID).Scan(&lastSeq, &lastEvent); err != nil {
		return fmt.Errorf("export audit: %w", err)
	}
	var chain arbiter.AuditChain
	now := d.nowMS()
	head := arbiter.AuditLine{Kind: arbiter.AuditLineExport, Account: accountID, Format: arbiter.AuditExportFormat,
		ExportedAt: &now, Keys: &keys}
	if since > 0 {
		head.Since = &since
	}
	if err := chain.Write(w, head); err != nil {
		return err
	}
	decisions := exportCursor[arbiter.AuditLine]{next: func(after int64) ([]arbiter.AuditLine, int64, error) {
		return d.exportDecisions(ctx, accountID, since, after, lastSeq)
	}}
	events := exportCursor[arbiter.AuditLine]{next: func(after int64) ([]arbiter.AuditLine, int64, error) {
		return d.exportEvents(ctx, accountID, since, after, lastEvent)
	}}
	for {
		dl, dok, err := decisions.peek()
		if err != nil {
			return err
		}
		el, eok, err := events.peek()
		if err != nil {
			return err
		}
		var l arbiter.AuditLine
		switch {
		case dok && (!eok || *dl.At <= *el.At):
			l = decisions.take()
		case eok:
			l = events.take()
		default:
			return chain.End(w, key)
		}
		if err := chain.Write(w, l); err != nil {
			return err
		}
	}
}

// exportCursor walks lines a page at a time; next reads the page after a
// position, and returns its lines and the position of its last.
type exportCursor[T any] struct {
	next  func(after int64) ([]T, int64, error)
	page  []T
	after int64
	done  bool
}

// peek returns the next line without taking it; false at the end.
func (c *exportCursor[T]) peek() (T, bool, error) {
	var zero T
	if len(c.page) == 0 && !c.done {
		page, last, err := c.next(c.after)
		if err != nil {
			return zero, false, err
		}
		c.page, c.after, c.done = page, last, len(page) < exportPage
	}
	if len(c.page) == 0 {
		return zero, false, nil
	}
	return c.page[0], true, nil
}

// take takes the line peek returned.
func (c *exportCursor[T]) take() T {
	l := c.page[0]
	c.page = c.page[1:]
	return l
}

// exportDecisions reads the account's decisions after seq after, up to
// seq last, decided at or after since: a page of decision lines.
func (d *DB) exportDecisions(ctx context.Context, accountID string, since arbiter.Timestamp, after, last int64) ([]arbiter.AuditLine, int64, error) {
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT r.seq, r.task_id, r.receipt, r.decided_at, t.action, t.action_edit, t.approved_digest
		FROM receipts r JOIN tasks t ON t.id = r.task_id
		WHERE r.account_id = ? AND r.seq > ? AND r.seq <= ? AND r.decided_at >= ? ORDER BY r.seq LIMIT ?`),
		accountID, after, last, int64(since), exportPage)
	if err != nil {
		return nil, 0, fmt.Errorf("export decisions: %w", err)
	}
	defer rows.Close()
	var out []arbiter.AuditLine
	for rows.Next() {
		var (
			seq, at                  int64
			task                     arbiter.Task
			receipt                  string
			action, edit, approvedTo sql.NullString
		)
		if err := rows.Scan(&seq, &task.ID, &receipt, &at, &action, &edit, &approvedTo); err != nil {
			return nil, 0, fmt.Errorf("export decisions: %w", err)
		}
		if err := readAction(&task, action, edit, approvedTo); err != nil {
			return nil, 0, fmt.Errorf("export decisions: task %s: %w", task.ID, err)
		}
		c, err := arbiter.ReceiptClaimsOf(receipt)
		if err != nil {
			return nil, 0, fmt.Errorf("export decisions: the receipt of %s: %w", task.ID, err)
		}
		decidedAt := arbiter.Timestamp(at)
		out = append(out, arbiter.AuditLine{Kind: arbiter.AuditLineDecision, At: &decidedAt, Decision: &arbiter.AuditDecision{
			TaskID: task.ID, Seq: seq, Verdict: c.Verdict, Tier: c.Tier, DecidedBy: c.DecidedBy, Action: task.ApprovedAction,
			Receipt: receipt}})
		after = seq
	}
	return out, after, rows.Err()
}

// exportEvents reads the account's audit events after id after, up to id
// last, recorded at or after since: a page of event lines.
func (d *DB) exportEvents(ctx context.Context, accountID string, since arbiter.Timestamp, after, last int64) ([]arbiter.AuditLine, int64, error) {
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT id, kind, actor, detail, client_ip, user_agent, created_at
		FROM audit_events WHERE account_id = ? AND id > ? AND id <= ? AND created_at >= ? ORDER BY id LIMIT ?`),
		accountID, after, last, int64(since), exportPage)
	if err != nil {
		return nil, 0, fmt.Errorf("export events: %w", err)
	}
	defer rows.Close()
	var out []arbiter.AuditLine
	for rows.Next() {
		var e arbiter.AuditEventLine
		var at int64
		if err := rows.Scan(&e.ID, &e.Kind, &e.Actor, &e.Detail, &e.ClientIP, &e.UserAgent, &at); err != nil {
			return nil, 0, fmt.Errorf("export events: %w", err)
		}
		createdAt := arbiter.Timestamp(at)
		out = append(out, arbiter.AuditLine{Kind: arbiter.AuditLineEvent, At: &createdAt, Event: &e})
		after = e.ID
	}
	return out, after, rows.Err()
}
