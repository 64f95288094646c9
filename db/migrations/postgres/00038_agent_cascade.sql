-- +goose Up
-- The agent tier as a cascade (issue 43). Each agent attempt names the
-- verifier it asked, says whether it passed the task to the next one, and
-- records the tokens its call took and their cost; a task the agent tier
-- decided names the verifier that did (task_states.final_verifier, at the
-- view's end); a policy's say on the cascade (its verifiers, their
-- thresholds, certified mode, require_person_if) is one JSON column.
ALTER TABLE attempts ADD COLUMN verifier TEXT;
ALTER TABLE attempts ADD COLUMN passed_on BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE attempts ADD COLUMN input_tokens INTEGER;
ALTER TABLE attempts ADD COLUMN output_tokens INTEGER;
ALTER TABLE attempts ADD COLUMN cost DOUBLE PRECISION;
ALTER TABLE task_states ADD COLUMN final_verifier TEXT;
-- A task's cascade stage: the index of the verifier its next call asks.
ALTER TABLE task_states ADD COLUMN cascade_stage INTEGER NOT NULL DEFAULT 0;
ALTER TABLE policies ADD COLUMN agent TEXT;
CREATE OR REPLACE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung,
        b.action, s.action_edit, s.approved_digest,
        s.final_verifier, s.cascade_stage
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id;

-- +goose Down
DROP VIEW tasks;
CREATE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung,
        b.action, s.action_edit, s.approved_digest
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id;
ALTER TABLE policies DROP COLUMN agent;
ALTER TABLE task_states DROP COLUMN cascade_stage;
ALTER TABLE task_states DROP COLUMN final_verifier;
ALTER TABLE attempts DROP COLUMN cost;
ALTER TABLE attempts DROP COLUMN output_tokens;
ALTER TABLE attempts DROP COLUMN input_tokens;
ALTER TABLE attempts DROP COLUMN passed_on;
ALTER TABLE attempts DROP COLUMN verifier;
