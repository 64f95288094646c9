package db

import (
	"context"
	"fmt"
	"strconv"

	"github.com/arbiterhq/arbiter"
)

// ApplyPolicyThreshold sets the confidence_threshold of the account's
// policy of taskType, creating the policy with it alone when there is
// none, in one statement that leaves the policy's other columns as they
// are, and records the change in the audit log (see
// arbiter.PolicyService).
func (d *DB) ApplyPolicyThreshold(ctx context.Context, accountID, taskType string, threshold float64, by arbiter.Actor) (_ *arbiter.Policy, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := (&arbiter.Policy{TaskType: taskType, ConfidenceThreshold: &threshold}).Validate(); err != nil {
		return nil, err
	}
	var p arbiter.Policy
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManagePolicies); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO policies (account_id, task_type, confidence_threshold, updated_at)
			VALUES (?, ?, ?, ?)
			ON CONFLICT (account_id, task_type) DO UPDATE SET confidence_threshold = excluded.confidence_threshold,
				updated_at = excluded.updated_at`),
			accountID, taskType, threshold, int64(d.nowMS())); err != nil {
			return accountDeleted(fmt.Errorf("apply policy threshold: %w", err))
		}
		p, err = scanPolicy(tx.QueryRowContext(ctx, d.rebind(`SELECT `+policyColumns+` FROM policies
			WHERE account_id = ? AND task_type = ?`), accountID, taskType))
		if err != nil {
			return fmt.Errorf("apply policy threshold: %w", err)
		}
		detail := p.Summary() + ": the certified threshold " + strconv.FormatFloat(threshold, 'f', 2, 64) + " applied from the calibration report"
		return d.insertAuditEvent(ctx, tx, arbiter.NewPolicyAuditEvent(arbiter.AuditPolicyChanged, accountID, taskType, detail, by))
	})
	d.policies.forget(accountID)
	if err != nil {
		return nil, err
	}
	return &p, nil
}
