-- +goose Up
-- Traces across a task's life (issue 46, item 6): the W3C traceparent of
-- the request that created a task, so that the worker's agent decision
-- and the wait for a person join the create's trace, and of the span that
-- queued each outbox message, so that its delivery does too. NULL when
-- tracing was off.
ALTER TABLE task_states ADD COLUMN traceparent TEXT;
ALTER TABLE webhook_messages ADD COLUMN traceparent TEXT;
ALTER TABLE slack_messages ADD COLUMN traceparent TEXT;
ALTER TABLE teams_messages ADD COLUMN traceparent TEXT;
ALTER TABLE mail_messages ADD COLUMN traceparent TEXT;

-- +goose Down
ALTER TABLE mail_messages DROP COLUMN traceparent;
ALTER TABLE teams_messages DROP COLUMN traceparent;
ALTER TABLE slack_messages DROP COLUMN traceparent;
ALTER TABLE webhook_messages DROP COLUMN traceparent;
ALTER TABLE task_states DROP COLUMN traceparent;
