-- +goose Up
-- Gold tasks (gold.go): a task created with a gold_verdict has a row here,
-- written in the create's transaction. A side table, not a column of
-- tasks: few tasks are gold, the hot reads of tasks never need it, and
-- the verdict stays out of every read that does not ask for it. account_id
-- lets the desk find an account's waiting gold tasks without a scan of
-- its tasks. accounts.gold_rate is how often the desk serves one first.
CREATE TABLE gold_tasks (
    task_id    TEXT NOT NULL PRIMARY KEY REFERENCES tasks (id),
    account_id TEXT NOT NULL,
    verdict    TEXT NOT NULL
);
CREATE INDEX gold_tasks_account ON gold_tasks (account_id);
ALTER TABLE accounts ADD COLUMN gold_rate DOUBLE PRECISION NOT NULL DEFAULT 0.1;

-- +goose Down
ALTER TABLE accounts DROP COLUMN gold_rate;
DROP TABLE gold_tasks;
