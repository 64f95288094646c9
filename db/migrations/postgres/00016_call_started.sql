-- +goose Up
-- When the call of the current lease started (epoch ms), NULL until the
-- worker that holds the lease marks it (StartAgentCalls). A claim that
-- takes an expired lease counts a lost call only when it is set, so a
-- claim whose worker never learned of it (it timed out on the worker's
-- side and committed) costs the task nothing.
ALTER TABLE tasks ADD COLUMN call_started_at BIGINT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN call_started_at;
