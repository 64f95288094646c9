-- +goose Up
-- Slack copies that stay true (issue 41 item 5).
--
-- post_started_at is when an attempt at a post began whose outcome is
-- not recorded yet: the post may be in Slack without its ts. The next
-- attempt looks for it (conversations.history, by the message's
-- metadata) before posting again. NULL once the post's ts is recorded,
-- or Slack said it did not take the post.
ALTER TABLE slack_messages ADD COLUMN post_started_at BIGINT;

-- An update now rewrites the posts of one channel and is paced by it:
-- a pending update of every post becomes one per channel posted to.
INSERT INTO slack_messages (id, account_id, task_id, kind, channel, status, attempts, next_attempt_at, created_at)
SELECT DISTINCT u.id || ':' || p.channel, u.account_id, u.task_id, u.kind, p.channel, u.status, 0, u.next_attempt_at, u.created_at
FROM slack_messages u JOIN slack_messages p ON p.task_id = u.task_id AND p.kind = 'post' AND p.channel <> u.channel
WHERE u.kind = 'update' AND u.status = 'pending';

-- Each channel's turn, shared by every process: at most one message in
-- flight to it (holder, the message's id, until held_until, a lease),
-- the next no sooner than next_at. channel_id is the id Slack answered
-- to a post to the channel as it is named here, for conversations.history.
CREATE TABLE slack_channels (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    channel    TEXT NOT NULL,
    channel_id TEXT NOT NULL DEFAULT '',
    next_at    BIGINT NOT NULL DEFAULT 0,
    holder     TEXT,
    held_until BIGINT,
    PRIMARY KEY (account_id, channel)
);

-- The signatures of the interactions Slack posted in HTTP mode, for the
-- replay guard of every process, kept for the verification window.
CREATE TABLE slack_replays (
    signature TEXT PRIMARY KEY,
    seen_at   BIGINT NOT NULL
);
CREATE INDEX slack_replays_seen ON slack_replays (seen_at);

-- +goose Down
DROP TABLE slack_replays;
DROP TABLE slack_channels;
DELETE FROM slack_messages WHERE kind = 'update' AND id LIKE '%:%';
ALTER TABLE slack_messages DROP COLUMN post_started_at;
