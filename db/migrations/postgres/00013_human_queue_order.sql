-- +goose Up
-- The human queue indexed in the order the reviewer site walks it,
-- (created_at, id): a task page's previous and next tasks are one index
-- step each however deep the queue, where (account_id, created_at) left
-- them to a scan past every task before.
DROP INDEX tasks_human_queue;
CREATE INDEX tasks_human_queue ON tasks (account_id, created_at, id) WHERE status = 'human_needed';

-- +goose Down
DROP INDEX tasks_human_queue;
CREATE INDEX tasks_human_queue ON tasks (account_id, created_at) WHERE status = 'human_needed';
