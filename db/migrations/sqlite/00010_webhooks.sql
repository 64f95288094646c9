-- +goose Up
-- Webhooks (issue 15): an account's endpoints with their signing secrets,
-- its callback secret for tasks' callback_url, the outbox of messages
-- (written in the transaction of the change they announce) and the log of
-- their attempts. A message to an endpoint has endpoint_id; a callback has
-- its url instead.
CREATE TABLE webhook_endpoints (
    id                         TEXT PRIMARY KEY,
    account_id                 TEXT NOT NULL REFERENCES accounts (id),
    url                        TEXT NOT NULL,
    description                TEXT NOT NULL DEFAULT '',
    event_types                TEXT NOT NULL DEFAULT '',
    disabled                   TEXT NOT NULL DEFAULT '',
    secret                     TEXT NOT NULL,
    previous_secret            TEXT NOT NULL DEFAULT '',
    previous_secret_expires_at INTEGER,
    failing_since              INTEGER,
    created_at                 INTEGER NOT NULL
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at);

CREATE TABLE webhook_callback_secrets (
    account_id                 TEXT PRIMARY KEY REFERENCES accounts (id),
    secret                     TEXT NOT NULL,
    previous_secret            TEXT NOT NULL DEFAULT '',
    previous_secret_expires_at INTEGER,
    created_at                 INTEGER NOT NULL
);

CREATE TABLE webhook_messages (
    id               TEXT PRIMARY KEY,
    account_id       TEXT NOT NULL REFERENCES accounts (id),
    endpoint_id      TEXT REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    url              TEXT NOT NULL DEFAULT '',
    event_type       TEXT NOT NULL,
    task_id          TEXT,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    last_attempt_at  INTEGER,
    last_status_code INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_messages_endpoint ON webhook_messages (endpoint_id, created_at);

CREATE TABLE webhook_attempts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id    TEXT NOT NULL REFERENCES webhook_messages (id) ON DELETE CASCADE,
    attempted_at  INTEGER NOT NULL,
    status_code   INTEGER NOT NULL,
    latency_ms    INTEGER NOT NULL,
    response_body TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX webhook_attempts_message ON webhook_attempts (message_id, id);

ALTER TABLE tasks ADD COLUMN callback_url TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN callback_url;
DROP TABLE webhook_attempts;
DROP TABLE webhook_messages;
DROP TABLE webhook_callback_secrets;
DROP TABLE webhook_endpoints;
