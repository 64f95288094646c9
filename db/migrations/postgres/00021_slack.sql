-- +goose Up
-- Slack (issue 31): an account's connection, its tokens sealed under
-- ARBITER_SECRET_KEY (db/secrets.go), and the outbox of Slack messages:
-- a "post" row written in the transaction that sends a task to a human,
-- an "update" row for each posted message when the task ends. ts and
-- channel_id are what Slack answered to the post, for chat.update.
CREATE TABLE slack_connections (
    account_id      TEXT PRIMARY KEY REFERENCES accounts (id),
    mode            TEXT NOT NULL,
    bot_token       TEXT NOT NULL,
    app_token       TEXT NOT NULL DEFAULT '',
    signing_secret  TEXT NOT NULL DEFAULT '',
    team_id         TEXT NOT NULL DEFAULT '',
    default_channel TEXT NOT NULL,
    created_at      BIGINT NOT NULL
);

CREATE TABLE slack_messages (
    id               TEXT PRIMARY KEY,
    account_id       TEXT NOT NULL REFERENCES accounts (id),
    task_id          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    channel          TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    channel_id       TEXT NOT NULL DEFAULT '',
    ts               TEXT NOT NULL DEFAULT '',
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    sent_at          BIGINT
);
CREATE INDEX slack_messages_due ON slack_messages (next_attempt_at) WHERE status = 'pending';
CREATE INDEX slack_messages_task ON slack_messages (task_id);

-- A task's own notify targets ("slack:#refunds", comma-separated), which
-- take the place of the account's channel; '' for the account's.
ALTER TABLE tasks ADD COLUMN notify TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tasks DROP COLUMN notify;
DROP TABLE slack_messages;
DROP TABLE slack_connections;
