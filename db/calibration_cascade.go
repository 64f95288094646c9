package db

import (
	"context"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// readCascade reads, inside tx, what the report's cascade needs
// (arbiter.ComposeCascade) for the account's tasks f selects by type,
// source and creation — created after f's created_after, else in the
// last arbiter.CascadeWindow before now — that are finished: who decided
// the newest arbiter.MaxCascadeTasks of them, what each verifier's calls
// on them cost, and the newest arbiter.DefaultDriftAudits blind audits of
// each verifier's decisions among the window's tasks.
func (d *DB) readCascade(ctx context.Context, tx *Tx, accountID string, f arbiter.CalibrationFilter, now arbiter.Timestamp) (arbiter.CascadeData, error) {
	since := arbiter.TimestampOf(now.Time().Add(-arbiter.CascadeWindow))
	if f.CreatedAfter != nil {
		since = *f.CreatedAfter
	}
	out := arbiter.CascadeData{Since: since}
	w := accountWhere(accountID)
	w.equal("task_type", f.TaskType)
	w.equal("source", f.Source)
	w.createdBetween(&since, f.CreatedBefore)
	w.add("final_tier IS NOT NULL")
	window := `(SELECT id, final_tier, final_verifier FROM task_states WHERE ` + w.String() + `
		ORDER BY created_at DESC, id DESC LIMIT ?) t`
	args := append(w.args, arbiter.MaxCascadeTasks)

	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT final_tier, COALESCE(final_verifier, ''), count(*) FROM `+window+`
		GROUP BY final_tier, final_verifier`), args...)
	if err != nil {
		return out, fmt.Errorf("count deciders: %w", err)
	}
	defer rows.Close()
	total := 0
	var verifiers []string
	for rows.Next() {
		var c arbiter.DeciderCount
		if err := rows.Scan(&c.Tier, &c.Verifier, &c.Tasks); err != nil {
			return out, fmt.Errorf("count deciders: %w", err)
		}
		out.Deciders = append(out.Deciders, c)
		total += c.Tasks
		if c.Tier == arbiter.TierAgent && c.Verifier != "" {
			verifiers = append(verifiers, c.Verifier)
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("count deciders: %w", err)
	}
	rows.Close()
	out.Capped = total >= arbiter.MaxCascadeTasks

	rows, err = tx.QueryContext(ctx, d.rebind(`SELECT a.verifier, count(*), COALESCE(SUM(a.cost), 0)
		FROM attempts a JOIN `+window+` ON t.id = a.task_id WHERE a.verifier IS NOT NULL GROUP BY a.verifier`), args...)
	if err != nil {
		return out, fmt.Errorf("sum spend: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s arbiter.VerifierSpend
		if err := rows.Scan(&s.Verifier, &s.Calls, &s.Cost); err != nil {
			return out, fmt.Errorf("sum spend: %w", err)
		}
		out.Spend = append(out.Spend, s)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("sum spend: %w", err)
	}
	rows.Close()

	for _, v := range verifiers {
		aw := &where{conds: []string{"vp.account_id = ?", "vp.verifier = ?", "vp.audit = 1", "s.final_verifier = vp.verifier"},
			args: []any{accountID, v}}
		aw.equal("vp.task_type", f.TaskType)
		aw.equal("vp.source", f.Source)
		aw.add("vp.created_at > ?", int64(since))
		if f.CreatedBefore != nil {
			aw.add("vp.created_at < ?", int64(*f.CreatedBefore))
		}
		rows, err := tx.QueryContext(ctx, d.rebind(`SELECT vp.version, vp.weight, vp.correct FROM verifier_pairs vp
			JOIN task_states s ON s.id = vp.task_id WHERE `+aw.String()+` ORDER BY vp.created_at DESC, vp.task_id DESC LIMIT ?`),
			append(aw.args, arbiter.DefaultDriftAudits)...)
		if err != nil {
			return out, fmt.Errorf("read decision audits: %w", err)
		}
		for rows.Next() {
			a := arbiter.DecisionAudit{Verifier: v}
			var correct int
			if err := rows.Scan(&a.Version, &a.Weight, &correct); err != nil {
				rows.Close()
				return out, fmt.Errorf("read decision audits: %w", err)
			}
			a.Correct = correct == 1
			out.Audits = append(out.Audits, a)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return out, fmt.Errorf("read decision audits: %w", err)
		}
	}
	return out, nil
}
