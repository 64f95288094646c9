-- +goose Up
-- The certificate as strong as its evidence (issue 41). A policy holds the
-- agent to a target (arbiter.Policy.Target): the error rate and confidence
-- its certified threshold was applied at, or set by hand; drift is watched
-- per policy against it. Crossings are per policy (its task type,
-- 'default' for the default policy) in a table of their own, so that a
-- release before this one keeps writing calibration_drifts as it did; the
-- account's crossings stored before are copied as the default policy's.
ALTER TABLE policies ADD COLUMN target_error_rate DOUBLE PRECISION;
ALTER TABLE policies ADD COLUMN target_confidence DOUBLE PRECISION;

CREATE TABLE policy_drifts (
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    task_type    TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    audits       INTEGER NOT NULL,
    errors       INTEGER NOT NULL,
    error_rate   DOUBLE PRECISION NOT NULL,
    error_lower  DOUBLE PRECISION NOT NULL,
    target       DOUBLE PRECISION NOT NULL,
    confidence   DOUBLE PRECISION NOT NULL,
    drifted_at   BIGINT NOT NULL,
    cleared_at   BIGINT,
    mailed       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, task_type, drifted_at)
);
INSERT INTO policy_drifts (account_id, task_type, task_id, audits, errors, error_rate, error_lower, target, confidence,
    drifted_at, cleared_at, mailed)
    SELECT account_id, 'default', task_id, audits, errors, error_rate, error_lower, target, confidence, drifted_at, cleared_at, mailed
    FROM calibration_drifts;
CREATE UNIQUE INDEX policy_drifts_open ON policy_drifts (account_id, task_type) WHERE cleared_at IS NULL;
CREATE INDEX policy_drifts_unmailed ON policy_drifts (drifted_at) WHERE mailed = 0;
-- The window of one policy's task type reads its latest audits along this.
CREATE INDEX labelled_pairs_type_audits ON labelled_pairs (account_id, task_type, labelled_at) WHERE audit = 1;

-- +goose Down
DROP INDEX labelled_pairs_type_audits;
DROP TABLE policy_drifts;
ALTER TABLE policies DROP COLUMN target_confidence;
ALTER TABLE policies DROP COLUMN target_error_rate;
