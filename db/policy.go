package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/flight"
)

// Ensure the store implements the service.
var _ arbiter.PolicyService = (*DB)(nil)

// policyColumns lists, in scan order, the columns scanPolicy reads.
const policyColumns = `task_type, confidence_threshold, deadline_seconds, audit_rate, on_expiry, updated_at, notify, review_rule, alerts, edit_verdicts,
	target_error_rate, target_confidence, agent`

// scanPolicy reads a row of policyColumns.
func scanPolicy(row interface{ Scan(...any) error }) (arbiter.Policy, error) {
	var (
		p                    arbiter.Policy
		threshold, auditRate sql.NullFloat64
		target, confidence   sql.NullFloat64
		deadline             sql.NullInt64
		onExpiry, review     sql.NullString
		alerts, editVerdicts sql.NullString
		agent                sql.NullString
		updated              int64
		notify               string
	)
	if err := row.Scan(&p.TaskType, &threshold, &deadline, &auditRate, &onExpiry, &updated, &notify, &review, &alerts, &editVerdicts,
		&target, &confidence, &agent); err != nil {
		return arbiter.Policy{}, err
	}
	if editVerdicts.Valid {
		if err := json.Unmarshal([]byte(editVerdicts.String), &p.EditVerdicts); err != nil {
			return p, fmt.Errorf("policy %s: edit_verdicts: %w", p.TaskType, err)
		}
	}
	p.Target = targetOf(target, confidence)
	if agent.Valid {
		if err := json.Unmarshal([]byte(agent.String), &p.Agent); err != nil {
			return p, fmt.Errorf("policy %s: agent: %w", p.TaskType, err)
		}
	}
	if notify != "" {
		p.Notify = strings.Split(notify, ",")
	}
	if review.Valid && review.String != "" {
		r, err := arbiter.UnmarshalRequirement([]byte(review.String))
		if err != nil {
			return arbiter.Policy{}, err
		}
		p.Review = &r
	}
	p.ConfidenceThreshold, p.AuditRate, p.UpdatedAt = nullFloat(threshold), nullFloat(auditRate), arbiter.Timestamp(updated)
	if deadline.Valid {
		seconds := int(deadline.Int64)
		p.DeadlineSeconds = &seconds
	}
	if alerts.Valid {
		if err := json.Unmarshal([]byte(alerts.String), &p.Alerts); err != nil {
			return p, fmt.Errorf("policy %s: alerts: %w", p.TaskType, err)
		}
	}
	o, err := parseOnExpiry(onExpiry)
	p.OnExpiry = o
	return p, err
}

// alertsColumn is the stored form of reminders and escalation: their
// JSON, or NULL for none.
func alertsColumn(a arbiter.Alerts) any {
	if a.IsZero() {
		return nil
	}
	b, _ := json.Marshal(a) // waits and strings: never fails
	return string(b)
}

// editVerdictsColumn is the stored form of a policy's edit verdicts: their
// JSON, or NULL for none.
func editVerdictsColumn(verdicts []string) any {
	if len(verdicts) == 0 {
		return nil
	}
	b, _ := json.Marshal(verdicts) // strings: never fails
	return string(b)
}

// agentColumn is the stored form of a policy's say on the cascade: its
// JSON, or NULL for none.
func agentColumn(a arbiter.PolicyAgent) any {
	if a.IsZero() {
		return nil
	}
	b, _ := json.Marshal(a) // names, numbers and a string: never fails
	return string(b)
}

// onExpiryColumn is the stored form of an on-expiry outcome: its JSON, or
// NULL for expire.
func onExpiryColumn(o arbiter.OnExpiry) any {
	if o.IsExpire() {
		return nil
	}
	b, _ := json.Marshal(o) // a struct of strings and a float: never fails
	return string(b)
}

// parseOnExpiry reads a stored on-expiry outcome.
func parseOnExpiry(s sql.NullString) (arbiter.OnExpiry, error) {
	var o arbiter.OnExpiry
	if !s.Valid || s.String == "" {
		return o, nil
	}
	if err := json.Unmarshal([]byte(s.String), &o); err != nil {
		return o, fmt.Errorf("on_expiry: %w", err)
	}
	return o, nil
}

// ListPolicies returns the account's policies by task type.
func (d *DB) ListPolicies(ctx context.Context, accountID string) (_ []arbiter.Policy, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.selectPolicies(ctx, accountID)
}

// selectPolicies reads the account's policies by task type.
func (d *DB) selectPolicies(ctx context.Context, accountID string) ([]arbiter.Policy, error) {
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT `+policyColumns+` FROM policies
		WHERE account_id = ? ORDER BY task_type`), accountID)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	defer rows.Close()
	policies := []arbiter.Policy{}
	for rows.Next() {
		p, err := scanPolicy(rows)
		if err != nil {
			return nil, fmt.Errorf("list policies: %w", err)
		}
		policies = append(policies, p)
	}
	return policies, rows.Err()
}

var errPolicyNotFound = arbiter.Errorf(arbiter.ENOTFOUND, "The account has no policy for this task type.")

// FindPolicy returns the account's policy of a task type, or ENOTFOUND.
func (d *DB) FindPolicy(ctx context.Context, accountID, taskType string) (_ *arbiter.Policy, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	p, err := scanPolicy(d.db.QueryRowContext(ctx, d.rebind(`SELECT `+policyColumns+` FROM policies
		WHERE account_id = ? AND task_type = ?`), accountID, taskType))
	if err != nil {
		return nil, notFound(err, errPolicyNotFound.Message)
	}
	return &p, nil
}

// PutPolicy stores the policy of its task type, replacing the one before,
// and records the change in the audit log (see arbiter.PolicyService).
// Tasks created before keep their values: they hold their own copies.
func (d *DB) PutPolicy(ctx context.Context, accountID string, p arbiter.Policy, by arbiter.Actor) (_ *arbiter.Policy, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.UpdatedAt = d.nowMS()
	var deadline, review, target, confidence any
	if p.DeadlineSeconds != nil {
		deadline = *p.DeadlineSeconds
	}
	if p.Target != nil {
		target, confidence = p.Target.ErrorRate, p.Target.Confidence
	}
	if p.Review != nil {
		r, _ := p.Review.ForPolicy() // valid: its defaults applied
		if b := arbiter.MarshalRequirement(r); b != nil {
			p.Review = &r
			review = string(b)
		} else {
			p.Review = nil // today's single review: none to keep
		}
	}
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManagePolicies); err != nil {
			return err
		}
		if err := d.checkRungsTellMembers(ctx, tx, accountID, p.Alerts.Escalation); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO policies (account_id, `+policyColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id, task_type) DO UPDATE SET confidence_threshold = excluded.confidence_threshold,
				deadline_seconds = excluded.deadline_seconds, audit_rate = excluded.audit_rate,
				on_expiry = excluded.on_expiry, updated_at = excluded.updated_at,
				notify = excluded.notify, review_rule = excluded.review_rule, alerts = excluded.alerts,
				edit_verdicts = excluded.edit_verdicts,
				target_error_rate = excluded.target_error_rate, target_confidence = excluded.target_confidence,
				agent = excluded.agent`),
			accountID, p.TaskType, p.ConfidenceThreshold, deadline, p.AuditRate, onExpiryColumn(p.OnExpiry), int64(p.UpdatedAt),
			strings.Join(p.Notify, ","), review, alertsColumn(p.Alerts), editVerdictsColumn(p.EditVerdicts), target, confidence,
			agentColumn(p.Agent)); err != nil {
			return accountDeleted(fmt.Errorf("put policy: %w", err))
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewPolicyAuditEvent(arbiter.AuditPolicyChanged, accountID, p.TaskType, p.Summary(), by))
	})
	d.policies.forget(accountID)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// DeletePolicy removes the account's policy of a task type, or answers
// ENOTFOUND.
func (d *DB) DeletePolicy(ctx context.Context, accountID, taskType string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionManagePolicies); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM policies WHERE account_id = ? AND task_type = ?`), accountID, taskType)
		if err != nil {
			return fmt.Errorf("delete policy: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("delete policy: %w", err)
		} else if n == 0 {
			return errPolicyNotFound
		}
		return d.insertAuditEvent(ctx, tx, arbiter.NewPolicyAuditEvent(arbiter.AuditPolicyDeleted, accountID, taskType, "", by))
	})
	d.policies.forget(accountID)
	return err
}

// policyCacheTTL is how long a process uses an account's policies before
// it reads them again: a change made in the process applies at once (it
// forgets the account), one made in another process within this long.
const policyCacheTTL = 2 * time.Second

// maxCachedPolicyAccounts bounds the accounts whose policies a process
// keeps; past it the cache starts afresh.
const maxCachedPolicyAccounts = 10000

// policyCache keeps accounts' policies for the create path, so that a
// create costs no extra round trip for its policy: an account's policies
// are read once per policyCacheTTL, whatever the rate of its creates.
type policyCache struct {
	mu       sync.Mutex
	accounts map[string]cachedPolicies
	// changes counts forget's calls: a read that began before one is
	// not kept, as it may hold what the change replaced.
	changes uint64
	// reads are the reads in flight, shared by the misses that come
	// while one is (policyOf).
	reads flight.Group[policyReadKey, cachedPolicies]
}

// cachedPolicies are an account's policies by task type, read at readAt.
type cachedPolicies struct {
	byType map[string]*arbiter.Policy
	readAt time.Time
}

// forget drops the account's policies, so that the next create reads them.
func (c *policyCache) forget(accountID string) {
	c.mu.Lock()
	delete(c.accounts, accountID)
	c.changes++
	c.mu.Unlock()
}

// policyFor returns the policy a create of the account applies: its
// task type's, else the default one, else nil. A create that left no
// field for a policy to fill needs none, and reads none.
func (d *DB) policyFor(ctx context.Context, accountID string, in arbiter.TaskCreate) (*arbiter.Policy, error) {
	if in.Omitted == 0 {
		return nil, nil
	}
	return d.policyOf(ctx, accountID, in.TaskType)
}

// AgentPolicy returns the policy that governs the account's tasks of
// taskType for the agent tier: the type's own, else the default policy,
// else nil. It reads the policies the create path keeps
// (policyCacheTTL), so a worker asks the store at most once per account
// that often.
func (d *DB) AgentPolicy(ctx context.Context, accountID, taskType string) (_ *arbiter.Policy, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.policyOf(ctx, accountID, taskType)
}

// policyOf returns the account's policy of taskType, else its default
// policy, else nil, from the policies kept for policyCacheTTL.
func (d *DB) policyOf(ctx context.Context, accountID, taskType string) (*arbiter.Policy, error) {
	now := d.now()
	c := &d.policies
	c.mu.Lock()
	cached, ok := c.accounts[accountID]
	changes := c.changes
	c.mu.Unlock()
	if !ok || now.Sub(cached.readAt) >= policyCacheTTL || now.Before(cached.readAt) {
		// Misses that come while a read begun since the last change is in
		// flight wait for it instead of reading too: a worker that claims
		// thousands of tasks of one account at once asks once, not once a
		// task.
		var err error
		cached, err = c.reads.Do(ctx, policyReadKey{accountID, changes}, func() (cachedPolicies, error) {
			return d.readPolicies(ctx, accountID, now, changes)
		})
		if err != nil {
			return nil, err
		}
	}
	if p, ok := cached.byType[taskType]; ok {
		return p, nil
	}
	return cached.byType[arbiter.DefaultPolicyName], nil
}

// policyReadStarts and policyReadJoined are told when a read of an
// account's policies starts and when a miss joins one in flight; tests
// replace them.
var policyReadStarts, policyReadJoined = func(string) {}, func(string) {}

// policyReadKey names a read of an account's policies: the account, and
// the cache's count of changes when the read began, so that a miss after a
// change never shares a read begun before it.
type policyReadKey struct {
	accountID string
	changes   uint64
}

// readPolicies reads the account's policies and keeps them, unless the
// cache changed since changes.
func (d *DB) readPolicies(ctx context.Context, accountID string, now time.Time, changes uint64) (cachedPolicies, error) {
	policyReadStarts(accountID)
	policies, err := d.selectPolicies(ctx, accountID)
	c := &d.policies
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		return cachedPolicies{}, err
	}
	cached := cachedPolicies{byType: make(map[string]*arbiter.Policy, len(policies)), readAt: now}
	for i := range policies {
		cached.byType[policies[i].TaskType] = &policies[i]
	}
	if c.accounts == nil || len(c.accounts) >= maxCachedPolicyAccounts {
		c.accounts = map[string]cachedPolicies{}
	}
	if c.changes == changes {
		c.accounts[accountID] = cached
	}
	return cached, nil
}
