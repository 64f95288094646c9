-- +goose Up
-- Audit sampling (issue 16): the account's audit rate; a task's own rate
-- (its create's, then the rate it was sampled at) and its audit's state;
-- the audit flag of a reviewer's attempt; and the labelled pairs the
-- calibration report reads, one per task a person labelled after the agent
-- answered with a confidence.
ALTER TABLE accounts ADD COLUMN audit_rate DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN audit_rate DOUBLE PRECISION;
ALTER TABLE tasks ADD COLUMN audit_state TEXT;
CREATE INDEX tasks_audit_queue ON tasks (account_id, created_at) WHERE audit_state = 'waiting';
-- The review queue (human_needed, or waiting for an audit) in the order
-- the reviewer site walks it, so a task's neighbours are one index step.
CREATE INDEX tasks_review_queue ON tasks (account_id, created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
ALTER TABLE attempts ADD COLUMN audit BOOLEAN NOT NULL DEFAULT FALSE;

-- correct and audit are 0 or 1, so that the report sums them; bucket is
-- the confidence's hundredth (arbiter.ConfidenceBucketOf), computed once.
CREATE TABLE labelled_pairs (
    task_id       TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL REFERENCES accounts (id),
    task_type     TEXT NOT NULL,
    source        TEXT NOT NULL,
    model         TEXT NOT NULL,
    confidence    DOUBLE PRECISION NOT NULL,
    bucket        INTEGER NOT NULL,
    agent_verdict TEXT NOT NULL,
    human_verdict TEXT NOT NULL,
    correct       INTEGER NOT NULL,
    audit         INTEGER NOT NULL,
    weight        DOUBLE PRECISION NOT NULL,
    created_at    BIGINT NOT NULL,
    labelled_at   BIGINT NOT NULL
);
-- The report reads an account's newest pairs along this index, no sort.
CREATE INDEX labelled_pairs_account ON labelled_pairs (account_id, created_at, task_id);
CREATE INDEX labelled_pairs_disagreed ON labelled_pairs (account_id, labelled_at)
    WHERE audit = 1 AND correct = 0;

-- +goose Down
DROP TABLE labelled_pairs;
ALTER TABLE attempts DROP COLUMN audit;
DROP INDEX tasks_review_queue;
DROP INDEX tasks_audit_queue;
ALTER TABLE tasks DROP COLUMN audit_state;
ALTER TABLE tasks DROP COLUMN audit_rate;
ALTER TABLE accounts DROP COLUMN audit_rate;
