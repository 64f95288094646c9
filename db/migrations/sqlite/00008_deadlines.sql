-- +goose Up
-- A task's deadline (created_at plus the create's deadline_seconds) and
-- when it expired; the worker finds the tasks due to expire by the index.
ALTER TABLE tasks ADD COLUMN deadline_at INTEGER;
ALTER TABLE tasks ADD COLUMN expired_at INTEGER;
CREATE INDEX tasks_deadline ON tasks (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('pending', 'agent_running', 'human_needed');

-- +goose Down
DROP INDEX tasks_deadline;
ALTER TABLE tasks DROP COLUMN expired_at;
ALTER TABLE tasks DROP COLUMN deadline_at;
