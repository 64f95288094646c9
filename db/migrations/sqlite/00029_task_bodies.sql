-- +goose Up
-- The hot/cold split of tasks (issue 35): the same schema as on Postgres
-- (see its 00029_task_bodies.sql for the why). A task's small state stays
-- in task_states (the table tasks was, renamed: SQLite rewrites the foreign
-- keys that point at it), its body (prompt, allowed verdicts, context,
-- display) moves to task_bodies, and a VIEW named tasks joins the two with
-- every column tasks had, in the same order. DROP COLUMN rewrites the
-- table here, so every row is narrow at once.
ALTER TABLE tasks RENAME TO task_states;
CREATE TABLE task_bodies (
    id               TEXT PRIMARY KEY REFERENCES task_states (id),
    prompt           TEXT NOT NULL,
    allowed_verdicts TEXT NOT NULL,
    context          TEXT,
    display          TEXT
);
INSERT INTO task_bodies (id, prompt, allowed_verdicts, context, display)
    SELECT id, prompt, allowed_verdicts, context, display FROM task_states;
ALTER TABLE task_states DROP COLUMN prompt;
ALTER TABLE task_states DROP COLUMN allowed_verdicts;
ALTER TABLE task_states DROP COLUMN context;
ALTER TABLE task_states DROP COLUMN display;
CREATE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id;

-- +goose Down
DROP VIEW tasks;
ALTER TABLE task_states ADD COLUMN prompt TEXT NOT NULL DEFAULT '';
ALTER TABLE task_states ADD COLUMN allowed_verdicts TEXT NOT NULL DEFAULT '';
ALTER TABLE task_states ADD COLUMN context TEXT;
ALTER TABLE task_states ADD COLUMN display TEXT;
UPDATE task_states SET prompt = b.prompt, allowed_verdicts = b.allowed_verdicts,
    context = b.context, display = b.display
    FROM task_bodies b WHERE b.id = task_states.id;
DROP TABLE task_bodies;
ALTER TABLE task_states RENAME TO tasks;
