-- +goose Up
-- Mail is an outbox (issue 42): a reminder, an escalation rung, a digest or
-- a drift mail is a row written in the transaction that makes it due, one
-- per recipient, and the mail deliverer sends it under a lease with
-- retries (arbiter.MailRetry). data is the mail's content as JSON, sealed
-- under ARBITER_SECRET_KEY when the store has one (a digest carries
-- decision links), and emptied once the mail is sent.
CREATE TABLE mail_messages (
    id               TEXT PRIMARY KEY,
    account_id       TEXT NOT NULL REFERENCES accounts (id),
    kind             TEXT NOT NULL,
    recipient        TEXT NOT NULL,
    task_id          TEXT NOT NULL DEFAULT '',
    data             TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    sent_at          INTEGER
);
CREATE INDEX mail_messages_due ON mail_messages (next_attempt_at) WHERE status = 'pending';

-- The mails of an account that quote its callers' text (reminders, rungs,
-- digests) written each UTC day (issue 41): past arbiter's daily bound,
-- no more are written that day.
CREATE TABLE mail_usage (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    day        INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (account_id, day)
);

-- +goose Down
DROP TABLE mail_usage;
DROP TABLE mail_messages;
