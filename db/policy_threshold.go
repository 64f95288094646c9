package db

import (
	"context"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// ApplyCertifiedThreshold sets the confidence_threshold of the policy the
// calibration report of f concerns to threshold, and its target to f's,
// when the report's certificate, computed again inside the transaction
// from the labels as they are, certifies that threshold: never one below
// where its evidence ends (arbiter.CheckCertifiedThreshold). It creates
// the policy with those values alone when there is none, in one statement
// that leaves the policy's other columns as they are, and records the
// change in the audit log (see arbiter.PolicyService).
func (d *DB) ApplyCertifiedThreshold(ctx context.Context, accountID string, f arbiter.CalibrationFilter, threshold float64,
	by arbiter.Actor) (_ *arbiter.Policy, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	taskType, ok := f.PolicyTaskType()
	switch {
	case !ok && f.Verifier != "":
		return nil, arbiter.Errorf(arbiter.EINVALID, "A verifier's certificate is its own threshold, not the policy's: set \"certified\" on the policy to have each verifier decide at its certificate.")
	case !ok:
		return nil, arbiter.Errorf(arbiter.EINVALID, "A report of one source concerns no policy; open the report of its task type to apply a threshold.")
	}
	target := arbiter.ErrorTarget{ErrorRate: f.TargetErrorRate, Confidence: f.Confidence}
	if err := (&arbiter.Policy{TaskType: taskType, ConfidenceThreshold: &threshold, Target: &target}).Validate(); err != nil {
		return nil, err
	}
	var p arbiter.Policy
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManagePolicies); err != nil {
			return err
		}
		where, args := calibrationWhere(accountID, f)
		evidence, err := d.readEvidence(ctx, tx, where, append(args, d.calibrationCap))
		if err != nil {
			return err
		}
		c := arbiter.Certify(evidence, f.TargetErrorRate, f.Confidence)
		if err := arbiter.CheckCertifiedThreshold(c, threshold); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO policies (account_id, task_type, confidence_threshold, updated_at,
				target_error_rate, target_confidence)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id, task_type) DO UPDATE SET confidence_threshold = excluded.confidence_threshold,
				updated_at = excluded.updated_at, target_error_rate = excluded.target_error_rate,
				target_confidence = excluded.target_confidence`),
			accountID, taskType, *c.Threshold, int64(d.nowMS()), target.ErrorRate, target.Confidence); err != nil {
			return accountDeleted(fmt.Errorf("apply certified threshold: %w", err))
		}
		p, err = scanPolicy(tx.QueryRowContext(ctx, d.rebind(`SELECT `+policyColumns+` FROM policies
			WHERE account_id = ? AND task_type = ?`), accountID, taskType))
		if err != nil {
			return fmt.Errorf("apply certified threshold: %w", err)
		}
		detail := fmt.Sprintf("%s: the threshold %s certified at %s with %s confidence, applied from the calibration report",
			p.Summary(), arbiter.FormatThreshold(*c.Threshold), arbiter.FormatShare(target.ErrorRate), arbiter.FormatShare(target.Confidence))
		return d.insertAuditEvent(ctx, tx, arbiter.NewPolicyAuditEvent(arbiter.AuditPolicyChanged, accountID, taskType, detail, by))
	})
	d.policies.forget(accountID)
	if err != nil {
		return nil, err
	}
	return &p, nil
}
