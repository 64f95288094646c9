-- +goose Up
CREATE TABLE accounts (
    id         TEXT PRIMARY KEY,
    email      TEXT NOT NULL UNIQUE,
    daily_cap  INTEGER,
    created_at BIGINT NOT NULL
);

CREATE TABLE identities (
    id         TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    provider   TEXT NOT NULL,
    subject    TEXT NOT NULL,
    email      TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    UNIQUE (provider, subject)
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_account ON api_keys (account_id, created_at);

CREATE TABLE tasks (
    id                   TEXT PRIMARY KEY,
    account_id           TEXT NOT NULL REFERENCES accounts (id),
    status               TEXT NOT NULL,
    task_type            TEXT NOT NULL,
    source               TEXT NOT NULL,
    touchpoint           TEXT NOT NULL,
    prompt               TEXT NOT NULL,
    allowed_verdicts     TEXT NOT NULL,
    confidence_threshold DOUBLE PRECISION NOT NULL,
    context              TEXT,
    final_verdict        TEXT,
    final_tier           TEXT,
    final_confidence     DOUBLE PRECISION,
    created_at           BIGINT NOT NULL,
    completed_at         BIGINT,
    failures             INTEGER NOT NULL DEFAULT 0,
    run_after            BIGINT NOT NULL DEFAULT 0,
    lease_owner          TEXT,
    lease_expires_at     BIGINT
);
CREATE INDEX tasks_pending ON tasks (run_after) WHERE status = 'pending';
CREATE INDEX tasks_running ON tasks (lease_expires_at) WHERE status = 'agent_running';
CREATE INDEX tasks_human_queue ON tasks (account_id, created_at) WHERE status = 'human_needed';

CREATE TABLE attempts (
    id          BIGSERIAL PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks (id),
    tier        TEXT NOT NULL,
    verdict     TEXT,
    confidence  DOUBLE PRECISION,
    rationale   TEXT NOT NULL DEFAULT '',
    model       TEXT,
    reviewer    TEXT,
    error       TEXT,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX attempts_task ON attempts (task_id, id);

CREATE TABLE daily_usage (
    account_id TEXT NOT NULL,
    day        INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (account_id, day)
);

CREATE TABLE demo_verdicts (
    id              TEXT PRIMARY KEY,
    task_id         TEXT NOT NULL REFERENCES tasks (id),
    verdict         TEXT NOT NULL,
    rationale       TEXT,
    anon_session_id TEXT,
    created_at      BIGINT NOT NULL
);
CREATE INDEX demo_verdicts_session ON demo_verdicts (anon_session_id);

CREATE TABLE workers (
    id           TEXT PRIMARY KEY,
    heartbeat_at BIGINT NOT NULL
);

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- +goose Down
DROP TABLE settings;
DROP TABLE workers;
DROP TABLE demo_verdicts;
DROP TABLE daily_usage;
DROP TABLE attempts;
DROP TABLE tasks;
DROP TABLE api_keys;
DROP TABLE identities;
DROP TABLE accounts;
