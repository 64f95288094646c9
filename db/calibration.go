package db

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.CalibrationService = (*DB)(nil)

// insertLabelledPairSQL stores a labelled pair; a task makes one at most.
const insertLabelledPairSQL = `INSERT INTO labelled_pairs (task_id, account_id, task_type, source, model,
	confidence, bucket, agent_verdict, human_verdict, correct, audit, weight, created_at, labelled_at, version)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING`

// insertLabelledPair stores, inside tx, the pair a person's attempt h on t
// makes (arbiter.LabelledPairOf), if it makes one, and those it makes for
// the verifiers of t's cascade (arbiter.VerifierPairsOf).
func (d *DB) insertLabelledPair(ctx context.Context, tx *Tx, t *arbiter.Task, h arbiter.Attempt) error {
	p, ok := arbiter.LabelledPairOf(t, h)
	if !ok {
		return nil
	}
	if err := d.storeLabelledPair(ctx, tx, p); err != nil {
		return err
	}
	for _, vp := range arbiter.VerifierPairsOf(t, h) {
		_, err := tx.ExecContext(ctx, d.rebind(insertVerifierPairSQL), vp.TaskID, vp.Verifier, vp.AccountID, vp.TaskType, vp.Source,
			vp.Model, vp.Version, vp.Confidence, vp.Bucket(), vp.AgentVerdict, vp.HumanVerdict, boolInt(vp.Correct()),
			boolInt(vp.Audit), vp.Weight, int64(vp.CreatedAt), int64(vp.LabelledAt))
		if err != nil {
			return fmt.Errorf("insert verifier pair: %w", err)
		}
	}
	return nil
}

// insertVerifierPairSQL stores the pair of one verifier of a task's
// cascade (arbiter.VerifierPairsOf); a task makes one a verifier at most.
const insertVerifierPairSQL = `INSERT INTO verifier_pairs (task_id, verifier, account_id, task_type, source, model, version,
	confidence, bucket, agent_verdict, human_verdict, correct, audit, weight, created_at, labelled_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id, verifier) DO NOTHING`

// storeLabelledPair inserts p inside tx.
func (d *DB) storeLabelledPair(ctx context.Context, tx *Tx, p arbiter.LabelledPair) error {
	_, err := tx.ExecContext(ctx, d.rebind(insertLabelledPairSQL), p.TaskID, p.AccountID, p.TaskType, p.Source, p.Model,
		p.Confidence, p.Bucket(), p.AgentVerdict, p.HumanVerdict, boolInt(p.Correct()), boolInt(p.Audit), p.Weight,
		int64(p.CreatedAt), int64(p.LabelledAt), p.Version)
	if err != nil {
		return fmt.Errorf("insert labelled pair: %w", err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// AuditRate returns the account's audit rate. Returns ENOTFOUND for an
// unknown account.
func (d *DB) AuditRate(ctx context.Context, accountID string) (_ float64, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var rate float64
	if err := d.db.GetContext(ctx, &rate, d.rebind(`SELECT audit_rate FROM accounts WHERE id = ?`), accountID); err != nil {
		return 0, notFound(err, "Account not found.")
	}
	return rate, nil
}

// SetAuditRate sets the account's audit rate. Returns EINVALID for a rate
// arbiter.CheckAuditRate refuses and ENOTFOUND for an unknown account.
func (d *DB) SetAuditRate(ctx context.Context, accountID string, rate float64) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := arbiter.CheckAuditRate(rate); err != nil {
		return err
	}
	res, err := d.db.ExecContext(ctx, d.rebind(`UPDATE accounts SET audit_rate = ? WHERE id = ?`), rate, accountID)
	if err != nil {
		return fmt.Errorf("set audit rate: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set audit rate: %w", err)
	} else if n == 0 {
		return arbiter.Errorf(arbiter.ENOTFOUND, "Account not found.")
	}
	return nil
}

// maxCalibrationGroups bounds the groups the report's one scan returns:
// every confidence bucket for each of the confusion table's cells.
const maxCalibrationGroups = 101 * arbiter.MaxConfusionCells

// CalibrationData reads what a calibration report needs, in one read
// transaction: the pairs f selects, at most MaxCalibrationPairs of them
// (Options.MaxCalibrationPairs)
// (the newest by the task's creation, read along the index), summed in SQL
// by confidence bucket and verdicts in one scan, then by bucket and by
// verdicts here; the latest audit disagreements among them; and the
// account's waiting audits.
//
// The data is kept for CalibrationFor per account and filter, concurrent
// callers share one read, and an account's reads run one at a time
// (calibration_cache.go); ComputedAt says when it was read.
func (d *DB) CalibrationData(ctx context.Context, accountID string, f arbiter.CalibrationFilter) (_ arbiter.CalibrationData, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.calibrations.get(ctx, calibrationKeyOf(accountID, f), d.now, d.timeout,
		func(ctx context.Context) (arbiter.CalibrationData, error) {
			return d.readCalibrationData(ctx, accountID, f)
		})
}

// readCalibrationData reads what CalibrationData returns from the store's
// read pool (readPool).
func (d *DB) readCalibrationData(ctx context.Context, accountID string, f arbiter.CalibrationFilter) (_ arbiter.CalibrationData, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	where, args := calibrationWhere(accountID, f)
	// with returns args and then extra, in a slice of its own.
	with := func(extra ...any) []any { return append(slices.Clip(args), extra...) }

	out := arbiter.CalibrationData{ComputedAt: d.nowMS()}
	err = d.transactReadStale(ctx, func(tx *Tx) error {
		if err := d.readBuckets(ctx, tx, where, with(d.calibrationCap, maxCalibrationGroups), &out); err != nil {
			return err
		}
		var err error
		if out.Evidence, err = d.readEvidence(ctx, tx, where, with(d.calibrationCap)); err != nil {
			return err
		}
		if out.Strata, err = readStrata(ctx, tx, d, where, with(d.calibrationCap, d.calibrationCap)); err != nil {
			return err
		}
		if out.Disagreements, err = readDisagreements(ctx, tx, d, where, with(arbiter.MaxListedDisagreements)); err != nil {
			return err
		}
		if err := tx.GetContext(ctx, &out.AuditsWaiting, d.rebind(`SELECT count(*) FROM tasks
			WHERE account_id = ? AND audit_state = ?`), accountID, arbiter.AuditStateWaiting); err != nil {
			return fmt.Errorf("count waiting audits: %w", err)
		}
		since := int64(out.ComputedAt) - int64(arbiter.AuditPaceDays)*86_400_000
		if err := tx.GetContext(ctx, &out.RecentLabels, d.rebind(`SELECT count(*) FROM `+where+` AND labelled_at > ?`), with(since)...); err != nil {
			return fmt.Errorf("count recent labels: %w", err)
		}
		if out.Cascade, err = d.readCascade(ctx, tx, accountID, f, out.ComputedAt); err != nil {
			return err
		}
		out.Drifts, err = d.reportDrifts(ctx, tx, accountID, f)
		return err
	})
	return out, err
}

// reportDrifts reads, inside tx, the open crossings a report of f
// concerns: every policy's for a report of every task type, else that of
// the policy governing f's task type (its own, or the default policy).
func (d *DB) reportDrifts(ctx context.Context, tx *Tx, accountID string, f arbiter.CalibrationFilter) ([]arbiter.Drift, error) {
	if f.TaskType == "" {
		return d.openDrifts(ctx, tx, accountID, "")
	}
	scope, _, err := d.driftScope(ctx, tx, accountID, f.TaskType)
	if err != nil {
		return nil, err
	}
	return d.openDrifts(ctx, tx, accountID, scope)
}

// fineBucketSQL is the SQL of arbiter.FineBucketOf(confidence): the
// confidence's thousandth, floor(1000c + 1e-9), in double precision as Go
// computes it (a confidence is from 0 to 1).
func (d *DB) fineBucketSQL() string {
	if d.dialect == Postgres {
		return `CAST(floor(confidence * 1000 + CAST(1e-9 AS DOUBLE PRECISION)) AS INTEGER)`
	}
	return `CAST(confidence * 1000 + 1e-9 AS INTEGER)`
}

// readEvidence sums, inside tx, the report's pairs as the certificate's
// evidence cells (arbiter.EvidenceCell): by thousandth of confidence,
// weight and kind. args are the report's filter arguments and the pair
// cap.
func (d *DB) readEvidence(ctx context.Context, tx *Tx, where string, args []any) ([]arbiter.EvidenceCell, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT fine, weight, audit, count(*), SUM(1 - correct), MIN(confidence)
		FROM (SELECT `+d.fineBucketSQL()+` AS fine, weight, audit, correct, confidence FROM `+where+` ORDER BY created_at DESC, task_id DESC LIMIT ?) p
		GROUP BY fine, weight, audit`), args...)
	if err != nil {
		return nil, fmt.Errorf("sum evidence: %w", err)
	}
	defer rows.Close()
	var out []arbiter.EvidenceCell
	for rows.Next() {
		var c arbiter.EvidenceCell
		if err := rows.Scan(&c.Bucket, &c.Weight, &c.Audit, &c.N, &c.Errors, &c.Lowest); err != nil {
			return nil, fmt.Errorf("sum evidence: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// calibrationWhere returns the table and WHERE clause of the pairs f
// selects for the account ("labelled_pairs WHERE …", or verifier_pairs
// for one verifier's), and its arguments.
func calibrationWhere(accountID string, f arbiter.CalibrationFilter) (string, []any) {
	w := accountWhere(accountID)
	table := "labelled_pairs"
	if f.Verifier != "" {
		table = "verifier_pairs"
		w.equal("verifier", f.Verifier)
	}
	w.equal("task_type", f.TaskType)
	w.equal("source", f.Source)
	w.equal("model", f.Model)
	w.equal("version", f.Version)
	w.createdBetween(f.CreatedAfter, f.CreatedBefore)
	return table + " WHERE " + w.String(), w.args
}

// readStrata sums, inside tx, the same pairs as the report by task_type,
// model, version and evidence cell in one scan, and returns them per
// task_type, per model and per version. args are the report's filter
// arguments, the pair cap and the group cap (no more groups than pairs).
func readStrata(ctx context.Context, tx *Tx, d *DB, where string, args []any) ([]arbiter.StratumBuckets, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT task_type, model, version, fine, weight, audit, count(*), SUM(1 - correct),
		MIN(confidence)
		FROM (SELECT task_type, model, version, `+d.fineBucketSQL()+` AS fine, weight, audit, correct, confidence FROM `+where+` ORDER BY created_at DESC, task_id DESC LIMIT ?) p
		GROUP BY task_type, model, version, fine, weight, audit LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("sum strata: %w", err)
	}
	defer rows.Close()
	type key struct{ dimension, value string }
	by := map[key]*arbiter.StratumBuckets{}
	add := func(k key, c arbiter.EvidenceCell) {
		s := by[k]
		if s == nil {
			s = &arbiter.StratumBuckets{Dimension: k.dimension, Value: k.value}
			by[k] = s
		}
		s.Evidence = append(s.Evidence, c)
	}
	for rows.Next() {
		var c arbiter.EvidenceCell
		var taskType, model, version string
		if err := rows.Scan(&taskType, &model, &version, &c.Bucket, &c.Weight, &c.Audit, &c.N, &c.Errors, &c.Lowest); err != nil {
			return nil, fmt.Errorf("sum strata: %w", err)
		}
		add(key{arbiter.StratumTaskType, taskType}, c)
		add(key{arbiter.StratumModel, model}, c)
		add(key{arbiter.StratumVersion, version}, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sum strata: %w", err)
	}
	out := make([]arbiter.StratumBuckets, 0, len(by))
	for _, k := range slices.SortedFunc(maps.Keys(by), func(a, b key) int {
		return cmp.Or(strings.Compare(a.dimension, b.dimension), strings.Compare(a.value, b.value))
	}) {
		out = append(out, *by[k])
	}
	return out, nil
}

// readBuckets sums, inside tx, the pairs where selects (args: its
// arguments, the pair cap and the group cap) by confidence bucket and by
// verdicts, into out's buckets and confusion cells, and notes whether the
// cap was reached.
func (d *DB) readBuckets(ctx context.Context, tx *Tx, where string, args []any, out *arbiter.CalibrationData) error {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT bucket, agent_verdict, human_verdict, count(*), SUM(audit),
		SUM(audit * (1 - correct)), SUM(weight), SUM(weight * weight), SUM(weight * correct), SUM(weight * confidence),
		SUM(weight * (confidence - correct) * (confidence - correct))
		FROM (SELECT bucket, agent_verdict, human_verdict, audit, correct, weight, confidence FROM `+where+` ORDER BY created_at DESC, task_id DESC LIMIT ?) p
		GROUP BY bucket, agent_verdict, human_verdict LIMIT ?`), args...)
	if err != nil {
		return fmt.Errorf("sum labelled pairs: %w", err)
	}
	defer rows.Close()
	buckets := map[int]*arbiter.ConfidenceBucket{}
	cells := map[[2]string]*arbiter.VerdictAgreement{}
	n := 0
	for rows.Next() {
		var g arbiter.ConfidenceBucket
		var agent, human string
		if err := rows.Scan(&g.Bucket, &agent, &human, &g.N, &g.Audits, &g.AuditsDisagree, &g.W, &g.W2, &g.WCorrect,
			&g.WConfidence, &g.WSquaredError); err != nil {
			return fmt.Errorf("sum labelled pairs: %w", err)
		}
		n += g.N
		if b := buckets[g.Bucket]; b == nil {
			buckets[g.Bucket] = &g
		} else {
			b.N, b.Audits, b.AuditsDisagree = b.N+g.N, b.Audits+g.Audits, b.AuditsDisagree+g.AuditsDisagree
			b.W, b.W2, b.WCorrect = b.W+g.W, b.W2+g.W2, b.WCorrect+g.WCorrect
			b.WConfidence, b.WSquaredError = b.WConfidence+g.WConfidence, b.WSquaredError+g.WSquaredError
		}
		key := [2]string{agent, human}
		if c := cells[key]; c == nil {
			cells[key] = &arbiter.VerdictAgreement{AgentVerdict: agent, HumanVerdict: human, N: g.N, Weight: g.W}
		} else {
			c.N, c.Weight = c.N+g.N, c.Weight+g.W
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sum labelled pairs: %w", err)
	}
	rows.Close()
	out.Capped = n >= d.calibrationCap
	for _, k := range slices.Sorted(maps.Keys(buckets)) {
		out.Buckets = append(out.Buckets, *buckets[k])
	}
	for _, c := range cells {
		out.Confusion = append(out.Confusion, *c)
	}
	slices.SortFunc(out.Confusion, func(a, b arbiter.VerdictAgreement) int {
		if a.N != b.N {
			return b.N - a.N
		}
		return cmp.Or(strings.Compare(a.AgentVerdict, b.AgentVerdict), strings.Compare(a.HumanVerdict, b.HumanVerdict))
	})
	if len(out.Confusion) > arbiter.MaxConfusionCells {
		out.Confusion = out.Confusion[:arbiter.MaxConfusionCells]
	}
	return nil
}

// readDisagreements reads, inside tx, the latest audits where selects
// (args: its arguments and the most to list) that disagreed with the
// agent.
func readDisagreements(ctx context.Context, tx *Tx, d *DB, where string, args []any) ([]arbiter.AuditDisagreement, error) {
	var out []arbiter.AuditDisagreement
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT task_id, agent_verdict, confidence, human_verdict, labelled_at
		FROM `+where+` AND audit = 1 AND correct = 0
		ORDER BY labelled_at DESC, task_id DESC LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("audit disagreements: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a arbiter.AuditDisagreement
		if err := rows.Scan(&a.TaskID, &a.AgentVerdict, &a.Confidence, &a.HumanVerdict, &a.LabelledAt); err != nil {
			return nil, fmt.Errorf("audit disagreements: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit disagreements: %w", err)
	}
	return out, nil
}

// CertifiedThreshold returns the threshold the certificate of one
// verifier gives at target: Certify over the labels of its answers at
// version (its series: a new version starts anew) on the account's tasks
// of taskType; nil when none is certified yet. It reads the evidence
// alone, from the store each time: the worker keeps what it returns
// (worker.CertificateFor).
func (d *DB) CertifiedThreshold(ctx context.Context, accountID, taskType, verifier, version string, target arbiter.ErrorTarget) (_ *float64, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	where, args := calibrationWhere(accountID, arbiter.CalibrationFilter{TaskType: taskType, Verifier: verifier, Version: version})
	var evidence []arbiter.EvidenceCell
	err = d.transactRead(ctx, func(tx *Tx) error {
		var err error
		evidence, err = d.readEvidence(ctx, tx, where, append(args, d.calibrationCap))
		return err
	})
	if err != nil {
		return nil, err
	}
	return arbiter.Certify(evidence, target.ErrorRate, target.Confidence).Threshold, nil
}
