-- +goose Up
-- Actions (issue 44): the tool call a task asks about. Its proposal, as
-- the create gave it with its digest and the verdicts that allow an edit,
-- is written once, with the task's body (task_bodies.action). A reviewer's
-- edit in force (a consensus voter's, or the deciding reviewer's) and the
-- digest of the action the final decision approved change later, so they
-- live in task_states. Each attempt records the digest of the action it
-- decided on. A policy may name the verdicts that allow an edit. The view
-- tasks gains the three task columns at its end.
ALTER TABLE task_bodies ADD COLUMN action TEXT;
ALTER TABLE task_states ADD COLUMN action_edit TEXT;
ALTER TABLE task_states ADD COLUMN approved_digest TEXT;
ALTER TABLE attempts ADD COLUMN action_digest TEXT;
ALTER TABLE policies ADD COLUMN edit_verdicts TEXT;
CREATE OR REPLACE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung,
        b.action, s.action_edit, s.approved_digest
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
        s.escalated_at, s.escalation_rung
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id;
ALTER TABLE policies DROP COLUMN edit_verdicts;
ALTER TABLE attempts DROP COLUMN action_digest;
ALTER TABLE task_states DROP COLUMN approved_digest;
ALTER TABLE task_states DROP COLUMN action_edit;
ALTER TABLE task_bodies DROP COLUMN action;
