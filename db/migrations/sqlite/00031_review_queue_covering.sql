-- +goose Up
-- The review queue's two orders' indexes (db.queueKey) also carry the
-- columns of their partial index's condition, so that the desk's count of
-- a task's position and of the queue's length (db.queuePlaceSQL) reads the
-- index alone, not a task row an entry: SQLite covers a query with an
-- index only when every column the query names is in it (the first key's
-- expression it takes from the index). SQLite has no INCLUDE; key columns
-- after the unique id change no order. The indexes hold only the tasks
-- waiting for a person, so rebuilding them is short.
DROP INDEX tasks_review_queue_escalated;
CREATE INDEX tasks_review_queue_escalated ON task_states (account_id, (CASE WHEN escalated_at IS NULL THEN 1 ELSE 0 END), created_at, id, status, audit_state)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
DROP INDEX tasks_review_queue_deadline;
CREATE INDEX tasks_review_queue_deadline ON task_states (account_id, (COALESCE(deadline_at, 9223372036854775807)), created_at, id, status, audit_state)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');

-- +goose Down
DROP INDEX tasks_review_queue_deadline;
CREATE INDEX tasks_review_queue_deadline ON task_states (account_id, (COALESCE(deadline_at, 9223372036854775807)), created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
DROP INDEX tasks_review_queue_escalated;
CREATE INDEX tasks_review_queue_escalated ON task_states (account_id, (CASE WHEN escalated_at IS NULL THEN 1 ELSE 0 END), created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
