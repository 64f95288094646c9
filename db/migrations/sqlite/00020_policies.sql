-- +goose Up
-- Policies (issue 30): an account's settings per task type, "default" for
-- every type without its own. on_expiry is the JSON of arbiter.OnExpiry,
-- NULL for expire. A task records the on-expiry outcome it was created
-- with (NULL for expire), so that changing a policy leaves it alone; the
-- deadline sweep finds the due tasks with an outcome by their own partial
-- index, and expires the others by tasks_deadline as before.
CREATE TABLE policies (
    account_id           TEXT NOT NULL REFERENCES accounts (id),
    task_type            TEXT NOT NULL,
    confidence_threshold REAL,
    deadline_seconds     INTEGER,
    audit_rate           REAL,
    on_expiry            TEXT,
    updated_at           BIGINT NOT NULL,
    PRIMARY KEY (account_id, task_type)
);
ALTER TABLE tasks ADD COLUMN on_expiry TEXT;
CREATE INDEX tasks_deadline_outcome ON tasks (deadline_at)
    WHERE deadline_at IS NOT NULL AND on_expiry IS NOT NULL AND status IN ('pending', 'agent_running', 'human_needed');

-- +goose Down
DROP INDEX tasks_deadline_outcome;
ALTER TABLE tasks DROP COLUMN on_expiry;
DROP TABLE policies;
