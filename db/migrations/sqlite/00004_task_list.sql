-- +goose Up
-- An account's task list, newest first, paged by (created_at, id).
CREATE INDEX tasks_account_created ON tasks (account_id, created_at, id);

-- +goose Down
DROP INDEX tasks_account_created;
