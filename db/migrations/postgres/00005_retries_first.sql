-- +goose Up
-- Failed calls whose retry is due are claimed before new tasks; this index
-- finds them without walking the backlog of new ones.
CREATE INDEX tasks_retries ON tasks (run_after) WHERE status = 'pending' AND failures > 0;

-- +goose Down
DROP INDEX tasks_retries;
