package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.DecisionLinkService = (*DB)(nil)

// Decision links: a digest's per-person, per-task, per-verdict links
// (arbiter's decisionlink.go). The token is stored as its SHA-256.

// oldestWaiting returns the account's oldest human_needed tasks, at most
// arbiter.MaxDigestLinkTasks, inside tx.
func (d *DB) oldestWaiting(ctx context.Context, tx *Tx, accountID string) ([]*arbiter.Task, error) {
	var ids []string
	if err := tx.SelectContext(ctx, &ids, d.rebind(`SELECT id FROM tasks WHERE account_id = ? AND status = ?
		ORDER BY created_at, id LIMIT ?`), accountID, arbiter.StatusHumanNeeded, arbiter.MaxDigestLinkTasks); err != nil {
		return nil, fmt.Errorf("find waiting tasks: %w", err)
	}
	tasks := make([]*arbiter.Task, 0, len(ids))
	for _, id := range ids {
		t, err := d.findTask(ctx, tx, accountID, id)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// insertDecisionLinks makes the person's links to the tasks, one per
// verdict (none past arbiter.MaxDigestLinkVerdicts), inside tx.
func (d *DB) insertDecisionLinks(ctx context.Context, tx *Tx, accountID, personID string, tasks []*arbiter.Task, now arbiter.Timestamp) ([]arbiter.DigestTask, error) {
	out := make([]arbiter.DigestTask, 0, len(tasks))
	for _, t := range tasks {
		dt := arbiter.DigestTask{TaskID: t.ID, Prompt: t.Prompt}
		var digest any
		if cur, ok := t.CurrentAction(); ok {
			dt.Action, digest = &cur, cur.Digest
		}
		if len(t.AllowedVerdicts) <= arbiter.MaxDigestLinkVerdicts {
			expires := arbiter.DecisionLinkExpiry(now, t.DeadlineAt)
			for _, v := range t.AllowedVerdicts {
				token := arbiter.NewSecretToken()
				if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO decision_links (token_hash, account_id, task_id, person_id,
					verdict, expires_at, created_at, action_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
					arbiter.HashToken(token), accountID, t.ID, personID, v, int64(expires), int64(now), digest); err != nil {
					return nil, fmt.Errorf("insert decision link: %w", err)
				}
				dt.Links = append(dt.Links, arbiter.VerdictLink{Verdict: v, Token: token})
			}
		}
		out = append(out, dt)
	}
	return out, nil
}

// storedLink is a decision link as stored: whether it was used, and its
// person's role in its account now ("" once they are not a member).
type storedLink struct {
	*arbiter.DecisionLink
	used bool
	role string
}

// findDecisionLink returns the link of token as stored.
func (d *DB) findDecisionLink(ctx context.Context, q sqlx.QueryerContext, token string) (storedLink, error) {
	if len(token) != 64 {
		return storedLink{}, arbiter.ErrDecisionLinkUnknown
	}
	var l arbiter.DecisionLink
	var used sql.NullInt64
	var role sql.NullString
	var expires int64
	var digest sql.NullString
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT l.account_id, l.task_id, l.person_id, p.email, l.verdict, l.expires_at, l.used_at, m.role,
		l.action_digest
		FROM decision_links l JOIN people p ON p.id = l.person_id
		LEFT JOIN memberships m ON m.account_id = l.account_id AND m.person_id = l.person_id
		WHERE l.token_hash = ?`), arbiter.HashToken(token)).
		Scan(&l.AccountID, &l.TaskID, &l.PersonID, &l.Email, &l.Verdict, &expires, &used, &role, &digest)
	l.ActionDigest = digest.String
	if errors.Is(err, sql.ErrNoRows) {
		return storedLink{}, arbiter.ErrDecisionLinkUnknown
	} else if err != nil {
		return storedLink{}, fmt.Errorf("find decision link: %w", err)
	}
	l.ExpiresAt = arbiter.Timestamp(expires)
	return storedLink{DecisionLink: &l, used: used.Valid, role: role.String}, nil
}

// usable returns why the link cannot decide at now, or nil: a link whose
// person no longer reviews for its account (removed, or a role without
// the desk) is refused before anything else, and shows nothing.
func usable(l storedLink, now arbiter.Timestamp) error {
	switch {
	case !arbiter.Can(l.role, arbiter.ActionReview):
		return arbiter.ErrDecisionLinkNotMember
	case l.used:
		return arbiter.ErrDecisionLinkUsed
	case l.ExpiresAt <= now:
		return arbiter.ErrDecisionLinkExpired
	}
	return nil
}

// FindDecisionLink returns the link and its task; see
// arbiter.DecisionLinkService.
func (d *DB) FindDecisionLink(ctx context.Context, token string) (_ *arbiter.DecisionLink, _ *arbiter.Task, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	l, err := d.findDecisionLink(ctx, d.db, token)
	if err != nil {
		return nil, nil, err
	}
	if err := usable(l, d.nowMS()); err != nil {
		return l.DecisionLink, nil, err
	}
	t, err := d.findTask(ctx, nil, l.AccountID, l.TaskID)
	if err != nil {
		return nil, nil, err
	}
	return l.DecisionLink, t, nil
}

// UseDecisionLink decides with the link; see
// arbiter.DecisionLinkService. The decision is DecideTask's, in its own
// transaction: two uses at once decide once, since a task is decided
// once. The links end after a decision, or after one refused because
// the task is no longer waiting.
func (d *DB) UseDecisionLink(ctx context.Context, token, personID string, client arbiter.Client) (*arbiter.Task, error) {
	l, err := d.findDecisionLink(ctx, d.db, token)
	if err != nil {
		return nil, d.unavailable(err)
	}
	if personID != "" && personID != l.PersonID {
		return nil, arbiter.ErrDecisionLinkOther
	}
	if err := usable(l, d.nowMS()); err != nil {
		return nil, err
	}
	t, err := d.DecideTask(ctx, l.AccountID, l.TaskID, arbiter.HumanDecision{Verdict: l.Verdict, Reviewer: l.Email,
		ReviewerID: l.PersonID, Client: client, Via: "e-mail link", ActionDigest: l.ActionDigest})
	if err != nil && arbiter.ErrorCode(err) != arbiter.ECONFLICT {
		return nil, err
	}
	if endErr := d.endDecisionLinks(ctx, l.DecisionLink); endErr != nil {
		return nil, endErr
	}
	return t, err
}

// endDecisionLinks ends the person's links to the link's task.
func (d *DB) endDecisionLinks(ctx context.Context, l *arbiter.DecisionLink) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.rebind(`UPDATE decision_links SET used_at = ?
		WHERE task_id = ? AND person_id = ? AND used_at IS NULL`), int64(d.nowMS()), l.TaskID, l.PersonID); err != nil {
		return fmt.Errorf("end decision links: %w", err)
	}
	return nil
}
