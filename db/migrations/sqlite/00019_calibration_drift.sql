-- +goose Up
-- Calibration drift (arbiter.NextDrift): one row per crossing of an
-- account's audited error rate above its target, open (cleared_at NULL)
-- until the rate is back under it. At most one open crossing per account,
-- so two audits answered at once tell the account once; mailed marks the
-- crossings whose owners and admins were e-mailed.
CREATE TABLE calibration_drifts (
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    task_id      TEXT NOT NULL,
    audits       INTEGER NOT NULL,
    errors       INTEGER NOT NULL,
    error_rate   REAL NOT NULL,
    error_lower  REAL NOT NULL,
    target       REAL NOT NULL,
    confidence   REAL NOT NULL,
    drifted_at   BIGINT NOT NULL,
    cleared_at   BIGINT,
    mailed       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, drifted_at)
);
CREATE UNIQUE INDEX calibration_drifts_open ON calibration_drifts (account_id) WHERE cleared_at IS NULL;
CREATE INDEX calibration_drifts_unmailed ON calibration_drifts (drifted_at) WHERE mailed = 0;
-- The drift window reads an account's latest blind audits along this.
CREATE INDEX labelled_pairs_audits ON labelled_pairs (account_id, labelled_at) WHERE audit = 1;

-- +goose Down
DROP INDEX labelled_pairs_audits;
DROP TABLE calibration_drifts;
