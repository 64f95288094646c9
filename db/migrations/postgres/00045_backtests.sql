-- +goose Up
-- Backtests (issue 43 item 5): a verifier asked on past tasks people
-- labelled. Its calls are kept here, apart from the tasks and their
-- attempts, which a backtest never changes.
CREATE TABLE backtest_runs (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    verifier    TEXT NOT NULL,
    model       TEXT NOT NULL,
    version     TEXT NOT NULL,
    task_type   TEXT NOT NULL,
    since_ms    BIGINT NOT NULL,
    task_limit  INTEGER NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT NOT NULL,
    report      TEXT NOT NULL
);
CREATE INDEX backtest_runs_account ON backtest_runs (account_id, started_at);

-- One row a task the run asked about, in the run's order.
CREATE TABLE backtest_calls (
    run_id        TEXT NOT NULL REFERENCES backtest_runs (id),
    position      INTEGER NOT NULL,
    task_id       TEXT NOT NULL,
    verdict       TEXT,
    confidence    DOUBLE PRECISION,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost          DOUBLE PRECISION NOT NULL,
    error         TEXT,
    PRIMARY KEY (run_id, position)
);

-- +goose Down
DROP TABLE backtest_calls;
DROP TABLE backtest_runs;
