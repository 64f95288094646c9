-- +goose Up
-- An endpoint's messages waiting for a retry, in the order the schedule
-- would send them: a delivery that succeeds brings the first few forward
-- (db.bringForwardSQL), an index step rather than a walk of every message
-- the endpoint ever had.
CREATE INDEX webhook_messages_waiting ON webhook_messages (endpoint_id, next_attempt_at) WHERE status = 'pending';

-- +goose Down
DROP INDEX webhook_messages_waiting;
