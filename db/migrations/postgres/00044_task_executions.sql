-- +goose Up
-- The execution of a task's approved action (issue 47): whoever runs the
-- action claims it first, and the first claim of a task holds, so that the
-- action runs at most once however many processes (gateways, SDKs) see the
-- approval. A claim repeated with its claim_id is the same claim.
CREATE TABLE task_executions (
    task_id    TEXT PRIMARY KEY REFERENCES task_states (id),
    account_id TEXT NOT NULL REFERENCES accounts (id),
    digest     TEXT NOT NULL,
    claim_id   TEXT NOT NULL,
    executor   TEXT NOT NULL DEFAULT '',
    claimed_at BIGINT NOT NULL
);
CREATE INDEX task_executions_account ON task_executions (account_id);

-- +goose Down
DROP TABLE task_executions;
