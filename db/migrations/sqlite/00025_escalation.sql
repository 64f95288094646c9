-- +goose Up
-- Reminders and escalation (issue 30). A task records the schedule it was
-- created with as the JSON of arbiter.Alerts (NULL for none, as most
-- tasks have: their creates and finishes write nothing more), the steps
-- fired so far (alert_step, the claim's counter) and when the next may
-- come due (alert_at: a first guess from the creation, corrected by the
-- sweep once the task waits for a person; NULL when none is left). The
-- sweep walks tasks_alert_due, which holds only the tasks waiting for a
-- person with a step to come. escalated_at and escalation_rung are the
-- last rung reached.
ALTER TABLE tasks ADD COLUMN alerts TEXT;
ALTER TABLE tasks ADD COLUMN alert_step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN alert_at BIGINT;
ALTER TABLE tasks ADD COLUMN escalated_at BIGINT;
ALTER TABLE tasks ADD COLUMN escalation_rung INTEGER;
CREATE INDEX tasks_alert_due ON tasks (alert_at) WHERE alert_at IS NOT NULL AND status = 'human_needed';
ALTER TABLE policies ADD COLUMN alerts TEXT;
-- The desk's default order puts the escalated tasks first, then the
-- oldest (db.queueKey): its index replaces tasks_review_queue, whose
-- columns follow its first, so the queue's counts still walk it.
CREATE INDEX tasks_review_queue_escalated ON tasks (account_id, (CASE WHEN escalated_at IS NULL THEN 1 ELSE 0 END), created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
DROP INDEX tasks_review_queue;

-- +goose Down
CREATE INDEX tasks_review_queue ON tasks (account_id, created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
DROP INDEX tasks_review_queue_escalated;
ALTER TABLE policies DROP COLUMN alerts;
DROP INDEX tasks_alert_due;
ALTER TABLE tasks DROP COLUMN escalation_rung;
ALTER TABLE tasks DROP COLUMN escalated_at;
ALTER TABLE tasks DROP COLUMN alert_at;
ALTER TABLE tasks DROP COLUMN alert_step;
ALTER TABLE tasks DROP COLUMN alerts;
