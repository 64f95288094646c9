package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/internal/group"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// finishGroup records agent attempts in groups on Postgres (db/internal/group): a
// worker with many calls in flight finishes them with one statement and
// one commit per group instead of a transaction each, as River's completer
// does (riverqueue/river internal/jobcompleter).
type finishGroup = group.Grouper[agentFinish, struct{}]

// maxFinishGroup bounds the finishes in one statement: a worker may have
// thousands of calls in flight, and a finish is a short row.
const maxFinishGroup = 1000

// finishGroupOf records a group of finishes and tells each its outcome. A
// second finish of a task already in the group, and every finish of a
// group of several whose statement failed, go through finishOne, so each
// gets its own answer. A finish the statement did not apply (its lease
// lost, its deadline passed) is told why, as finishOne would. A group of
// one takes the group's statement too: it updates the task, records the
// attempt and notifies in one round trip, where finishOne takes two.
func (d *DB) finishGroupOf(ctx context.Context, calls []*group.Call[agentFinish, struct{}]) {
	if len(calls) == 1 {
		c := calls[0]
		applied, err := d.finishMany(telemetry.WithParent(ctx, c.In.traceParent), []agentFinish{c.In})
		switch {
		case err != nil:
			c.Err = err
		case !applied[c.In.taskID]:
			c.Err = d.finishRefused(ctx, d.db, c.In.taskID)
		}
		return
	}
	var batch []agentFinish
	var inBatch, alone []*group.Call[agentFinish, struct{}]
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if seen[c.In.taskID] {
			alone = append(alone, c)
			continue
		}
		seen[c.In.taskID] = true
		batch, inBatch = append(batch, c.In), append(inBatch, c)
	}
	applied, err := d.finishMany(ctx, batch)
	if err != nil {
		d.log.Warn("a grouped finish failed; recording its finishes one by one", "finishes", len(batch), "error", err.Error())
	}
	d.finishes.AddGrouped(len(applied))
	for _, c := range inBatch {
		switch {
		case err != nil:
			c.Err = d.finishOne(ctx, c.In)
		case !applied[c.In.taskID]:
			c.Err = d.finishRefused(ctx, d.db, c.In.taskID)
		}
	}
	for _, c := range alone {
		c.Err = d.finishOne(ctx, c.In)
	}
}

// finishManySQL is the statement that applies a group of finishes in one
// statement: each task whose lease its owner still holds and whose deadline
// has not passed moves to its next status, and gets its attempt; the
// statement returns the tasks it moved (updatedColumns), notifying the
// final ones (sqlPublishing). A throttled call (record false) moves its
// task and records no attempt. Arguments are 'agent_running', then arrays, one element
// per finish, in the order of input's columns.
//
// The running status is compared through the input, not as a constant:
// with a constant the planner may find the tasks through the partial index
// of running tasks and compare each to every finish (its statistics often
// say no task is running), where finding each by id costs one lookup.
//
// Writes that must commit with a finish (an outbox, an audit) belong in
// finishMany's transaction, over the ids this statement returns.
func (d *DB) finishManySQL() string {
	return `WITH input AS MATERIALIZED (
		SELECT i.*, ?::text AS claimed FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::float8[], ?::bigint[],
			?::int[], ?::bigint[], ?::text[], ?::float8[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[],
			?::float8[], ?::bool[], ?::text[], ?::text[], ?::bool[], ?::text[], ?::bool[], ?::int[], ?::int[], ?::float8[], ?::int[],
			?::text[], ?::text[])
		AS i (id, owner, status, final_verdict, final_tier, final_confidence, completed_at,
			failed, run_after, verdict, confidence, rationale, model, error, started_at, finished_at, draw, record, version,
			final_verifier, reset, verifier, passed_on, input_tokens, output_tokens, cost, stage, action_digest, approved_digest)
	), u AS (
		UPDATE task_states t SET status = i.status, final_verdict = i.final_verdict, final_tier = i.final_tier,
			final_confidence = i.final_confidence, completed_at = i.completed_at, approved_digest = i.approved_digest,
			failures = CASE WHEN i.reset THEN 0 ELSE t.failures + i.failed END, run_after = i.run_after,
			final_verifier = i.final_verifier, cascade_stage = i.stage,
			lease_owner = NULL, lease_expires_at = NULL,
			audit_rate = CASE WHEN i.status = '` + arbiter.StatusCompleted + `' THEN ` + effectiveAuditRateT + ` ELSE t.audit_rate END,
			audit_state = CASE WHEN i.draw < ` + effectiveAuditRateT + ` THEN '` + arbiter.AuditStateWaiting + `' ELSE t.audit_state END
		FROM input i
		WHERE t.id = i.id AND t.status = i.claimed AND t.lease_owner = i.owner AND ` + d.beforeDeadline() + `
		RETURNING t.id, t.status, t.account_id, t.callback_url
	), a AS (
		INSERT INTO attempts (task_id, tier, verdict, confidence, rationale, model, reviewer, error, started_at, finished_at, version,
			verifier, passed_on, input_tokens, output_tokens, cost, action_digest)
		SELECT i.id, '` + arbiter.TierAgent + `', i.verdict, i.confidence, i.rationale, i.model, NULL, i.error, i.started_at, i.finished_at, i.version,
			i.verifier, i.passed_on, i.input_tokens, i.output_tokens, i.cost, i.action_digest
		FROM input i JOIN u ON u.id = i.id WHERE i.record
	)
	SELECT u.id, u.status, u.account_id, u.callback_url,
		CASE WHEN u.status IN ('` + arbiter.StatusCompleted + `', '` + arbiter.StatusExpired + `')
		THEN pg_notify('` + taskChannel + `', u.id) END FROM u`
}

// effectiveAuditRateT is effectiveAuditRate for the alias t: a grouped
// finish samples completed tasks for audit as finishOne does.
const effectiveAuditRateT = `COALESCE(t.audit_rate, (SELECT a.audit_rate FROM accounts a WHERE a.id = t.account_id))`

// finishMany runs finishManySQL over batch, whose task ids are distinct,
// in one transaction, wakes the waiters of the tasks it left final, and
// returns the ids of the tasks it moved.
func (d *DB) finishMany(ctx context.Context, batch []agentFinish) (map[string]bool, error) {
	stmt, err := d.stmt(ctx, d.finishManySQL())
	if err != nil {
		return nil, err
	}
	applied := make(map[string]bool, len(batch))
	err = d.transact(ctx, func(tx *Tx) error {
		rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, finishManyArgs(batch)...)
		if err != nil {
			return fmt.Errorf("finish attempts: %w", err)
		}
		updated, err := scanUpdated(rows)
		if err != nil {
			return fmt.Errorf("finish attempts: %w", err)
		}
		for _, u := range updated {
			applied[u.id] = true
		}
		// The webhook messages of the finishes, in their transaction,
		// their attempts and receipts in.
		events := eventsOf(updated)
		traceParents := make(map[string]string, len(batch))
		for _, f := range batch {
			traceParents[f.taskID] = f.traceParent
		}
		for i := range events {
			events[i].TraceParent = traceParents[events[i].TaskID]
		}
		_, err = tx.publishDecided(ctx, finishedDecisions(batch, updated), events...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// finishManyArgs returns finishManySQL's arguments for batch: the status
// a finished task must be in, then one array a column, each holding the
// batch's finishes in order.
func finishManyArgs(batch []agentFinish) []any {
	n := len(batch)
	var (
		ids, owners, statuses     = make([]string, n), make([]string, n), make([]string, n)
		finalVerdicts, finalTiers = make([]sql.NullString, n), make([]sql.NullString, n)
		finalConfidences          = make([]sql.NullFloat64, n)
		completedAts, runAfters   = make([]sql.NullInt64, n), make([]int64, n)
		failed                    = make([]int64, n)
		verdicts, models, errs    = make([]sql.NullString, n), make([]sql.NullString, n), make([]sql.NullString, n)
		versions                  = make([]sql.NullString, n)
		actionDigests, approved   = make([]sql.NullString, n), make([]sql.NullString, n)
		confidences               = make([]sql.NullFloat64, n)
		rationales                = make([]string, n)
		startedAts, finishedAts   = make([]int64, n), make([]sql.NullInt64, n)
		draws                     = make([]float64, n)
		record                    = make([]bool, n) // false for a throttled call, which records no attempt
		finalVerifiers, verifiers = make([]sql.NullString, n), make([]sql.NullString, n)
		resets, passedOn          = make([]bool, n), make([]bool, n)
		inTokens, outTokens       = make([]sql.NullInt64, n), make([]sql.NullInt64, n)
		costs                     = make([]sql.NullFloat64, n)
		stages                    = make([]int64, n)
	)
	for i, f := range batch {
		a := f.step.Attempt
		ids[i], owners[i], statuses[i] = f.taskID, f.owner, f.step.Next
		if f.step.Next == arbiter.StatusCompleted {
			finalVerdicts[i] = sql.NullString{String: *a.Verdict, Valid: true}
			finalTiers[i] = sql.NullString{String: arbiter.TierAgent, Valid: true}
			finalConfidences[i] = sql.NullFloat64{Float64: *a.Confidence, Valid: true}
			completedAts[i] = sql.NullInt64{Int64: int64(f.now), Valid: true}
		}
		failed[i], runAfters[i] = int64(f.failed()), int64(f.step.RunAfter)
		_, draws[i] = f.auditDraw()
		record[i] = !f.step.Throttled
		verdicts[i], models[i], errs[i], versions[i] = nullOf(a.Verdict), nullOf(a.Model), nullOf(a.Error), nullOf(a.Version)
		finalVerifiers[i] = nullOf(f.finalVerifier())
		verifiers[i], resets[i], passedOn[i], stages[i] = nullOf(a.Verifier), f.step.ResetFailures, a.PassedOn, int64(f.step.Stage)
		if a.InputTokens != nil && a.OutputTokens != nil {
			inTokens[i] = sql.NullInt64{Int64: int64(*a.InputTokens), Valid: true}
			outTokens[i] = sql.NullInt64{Int64: int64(*a.OutputTokens), Valid: true}
		}
		if a.Cost != nil {
			costs[i] = sql.NullFloat64{Float64: *a.Cost, Valid: true}
		}
		actionDigests[i] = nullOf(a.ActionDigest)
		if digest, ok := f.approvedDigest().(string); ok {
			approved[i] = sql.NullString{String: digest, Valid: true}
		}
		if a.Confidence != nil {
			confidences[i] = sql.NullFloat64{Float64: *a.Confidence, Valid: true}
		}
		rationales[i], startedAts[i] = a.Rationale, int64(a.StartedAt)
		if a.FinishedAt != nil {
			finishedAts[i] = sql.NullInt64{Int64: int64(*a.FinishedAt), Valid: true}
		}
	}
	return []any{arbiter.StatusAgentRunning,
		pq.Array(ids), pq.Array(owners), pq.Array(statuses), pq.Array(finalVerdicts), pq.Array(finalTiers),
		pq.Array(finalConfidences), pq.Array(completedAts), pq.Array(failed), pq.Array(runAfters),
		pq.Array(verdicts), pq.Array(confidences), pq.Array(rationales), pq.Array(models), pq.Array(errs),
		pq.Array(startedAts), pq.Array(finishedAts), pq.Array(draws), pq.Array(record), pq.Array(versions),
		pq.Array(finalVerifiers), pq.Array(resets), pq.Array(verifiers), pq.Array(passedOn), pq.Array(inTokens),
		pq.Array(outTokens), pq.Array(costs), pq.Array(stages), pq.Array(actionDigests), pq.Array(approved)}
}

// finishedDecisions are the decisions of the finishes that completed
// their tasks, for their receipts.
func finishedDecisions(batch []agentFinish, updated []updatedTask) []decision {
	byID := make(map[string]agentFinish, len(batch))
	for _, f := range batch {
		byID[f.taskID] = f
	}
	var decided []decision
	for _, u := range updated {
		if f := byID[u.id]; u.status == arbiter.StatusCompleted {
			decided = append(decided, decisionOf(u.accountID, u.id, *f.step.Attempt.Verdict, f.now, f.step.Attempt, ""))
		}
	}
	return decided
}

// nullOf is s as a nullable column value.
func nullOf(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}
