-- +goose Up
-- When each session was last used, written at most once an hour
-- (arbiter.SessionTouchDue): a session unused for the idle limit ends.
-- Sessions open at the upgrade count as seen now, so nobody is signed out
-- by it.
ALTER TABLE sessions ADD COLUMN last_seen_at BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET last_seen_at = (extract(epoch FROM now()) * 1000)::bigint;

-- +goose Down
ALTER TABLE sessions DROP COLUMN last_seen_at;
