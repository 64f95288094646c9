-- +goose Up
-- A certificate per verifier (issue 43). labelled_pairs pairs a person's
-- verdict with the agent tier's last answer on a task; verifier_pairs pairs
-- it with the last answer of each verifier of the task's cascade that
-- answered (arbiter.VerifierPairsOf), one row a task and verifier, in the
-- same columns, so that the calibration report reads either.
CREATE TABLE verifier_pairs (
    task_id       TEXT NOT NULL,
    verifier      TEXT NOT NULL,
    account_id    TEXT NOT NULL REFERENCES accounts (id),
    task_type     TEXT NOT NULL,
    source        TEXT NOT NULL,
    model         TEXT NOT NULL,
    version       TEXT NOT NULL,
    confidence    DOUBLE PRECISION NOT NULL,
    bucket        INTEGER NOT NULL,
    agent_verdict TEXT NOT NULL,
    human_verdict TEXT NOT NULL,
    correct       INTEGER NOT NULL,
    audit         INTEGER NOT NULL,
    weight        DOUBLE PRECISION NOT NULL,
    created_at    BIGINT NOT NULL,
    labelled_at   BIGINT NOT NULL,
    PRIMARY KEY (task_id, verifier)
);
-- A verifier's report and certificate read an account's newest pairs of
-- that verifier along this index.
CREATE INDEX verifier_pairs_account ON verifier_pairs (account_id, verifier, created_at, task_id);

-- +goose Down
DROP TABLE verifier_pairs;
