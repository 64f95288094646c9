-- +goose Up
-- The review queue's two orders' indexes (db.queueKey) also carry the
-- column each first key is computed from, so that the desk's count of a
-- task's position and of the queue's length (db.queuePlaceSQL) reads the
-- index alone, not a task row an entry. Postgres plans an index-only scan
-- only when every column a query names is in the index: the keys'
-- expressions are, the columns under them (INCLUDE) were not. The indexes
-- hold only the tasks waiting for a person, so rebuilding them is short.
DROP INDEX tasks_review_queue_escalated;
CREATE INDEX tasks_review_queue_escalated ON task_states (account_id, (CASE WHEN escalated_at IS NULL THEN 1 ELSE 0 END), created_at, id) INCLUDE (escalated_at)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
DROP INDEX tasks_review_queue_deadline;
CREATE INDEX tasks_review_queue_deadline ON task_states (account_id, (COALESCE(deadline_at, 9223372036854775807)), created_at, id) INCLUDE (deadline_at)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');

-- +goose Down
DROP INDEX tasks_review_queue_deadline;
CREATE INDEX tasks_review_queue_deadline ON task_states (account_id, (COALESCE(deadline_at, 9223372036854775807)), created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
DROP INDEX tasks_review_queue_escalated;
CREATE INDEX tasks_review_queue_escalated ON task_states (account_id, (CASE WHEN escalated_at IS NULL THEN 1 ELSE 0 END), created_at, id)
    WHERE (status = 'human_needed' OR audit_state = 'waiting');
