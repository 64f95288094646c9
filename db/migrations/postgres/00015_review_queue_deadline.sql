-- +goose Up
-- The review queue by the nearest deadline, tasks without one last, in the
-- order a view sorted by deadline walks it (db.queueKey): the queue page,
-- a task's neighbours on the desk and the next task are index steps, not a
-- sort of the whole queue.
CREATE INDEX tasks_review_queue_deadline ON tasks (account_id, (COALESCE(deadline_at, 9223372036854775807)), created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');

-- +goose Down
DROP INDEX tasks_review_queue_deadline;
