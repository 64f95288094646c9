-- +goose Up
-- The Teams outbox (issue 48): a "post" row written in the transaction
-- that sends a task to a person, for the conversation it goes to; an
-- "update" row, for each conversation its card was posted to, when it
-- changes or ends. activity_id, conversation_id and service_url are where
-- a sent post's card is, for the Bot Connector's update.
CREATE TABLE teams_messages (
    id               TEXT PRIMARY KEY,
    account_id       TEXT NOT NULL REFERENCES accounts (id),
    task_id          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    conversation     TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    activity_id      TEXT NOT NULL DEFAULT '',
    conversation_id  TEXT NOT NULL DEFAULT '',
    service_url      TEXT NOT NULL DEFAULT '',
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    sent_at          INTEGER
);
CREATE INDEX teams_messages_due ON teams_messages (next_attempt_at) WHERE status = 'pending';
CREATE INDEX teams_messages_task ON teams_messages (task_id);

-- Each conversation's turn, shared by every process, as Slack's channels'
-- (slack_channels): one message in flight to it (holder, until
-- held_until), the next no sooner than next_at.
CREATE TABLE teams_turns (
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    conversation TEXT NOT NULL,
    next_at      INTEGER NOT NULL DEFAULT 0,
    holder       TEXT,
    held_until   INTEGER,
    PRIMARY KEY (account_id, conversation)
);

-- +goose Down
DROP TABLE teams_turns;
DROP TABLE teams_messages;
