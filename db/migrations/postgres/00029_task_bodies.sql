-- +goose Up
-- The hot/cold split of tasks (issue 35). A task's small state, which the
-- worker's claim and finish and every later step rewrite, stays in a narrow
-- row of task_states (the table tasks was, renamed, so its indexes, its
-- constraints and the foreign keys that point at it move with it); its body,
-- written once by the create and only read after (prompt, allowed verdicts,
-- context, display: ~1 KB of the ~1.2 KB row), moves to task_bodies, one row
-- per task with the same id. An update of the state no longer copies the
-- body into a new row version, the heap and the WAL. A VIEW named tasks
-- joins the two with every column tasks had, in the same order, so reads
-- keep their SQL; writes name the tables (db/task.go says which column
-- lives where). The join is a LEFT JOIN on the body's primary key, so a
-- query that reads only state columns through the view never visits
-- task_bodies (Postgres and SQLite both remove such a join); every task has
-- its body, written in the create's statement or transaction.
--
-- A column added to tasks later goes to task_states (small, or updated) or
-- task_bodies (large and written once), and the view is re-created with it.
--
-- fillfactor 70 leaves room in each page of task_states for a later version
-- of its rows, so that an update that changes no indexed column (the call
-- start, call_started_at) stays on its page as a HOT update, with no new
-- index entries. It applies to pages written from now on.
--
-- On an existing database the copy runs first, while the service goes on
-- reading and writing tasks (ACCESS SHARE); the rename then takes an ACCESS
-- EXCLUSIVE lock on tasks until the migration commits, which copies the
-- bodies of the tasks created meanwhile (a scan of task_states) and changes
-- only the catalog after. docs/benchmarks.md ("Migrating a database of 1M
-- tasks") has the time on 1M tasks. DROP COLUMN does not rewrite the table:
-- a row written before keeps its body's bytes on disk until its next update
-- writes a narrow version (a task still open) or VACUUM FULL task_states,
-- which locks the table too, rewrites it (the finished tasks, which nothing
-- updates again).
--
-- The foreign key from task_bodies to task_states is NOT VALID: Postgres
-- checks every row written from now on, and the rows here were copied from
-- task_states itself, so checking them again would only hold the lock
-- longer. ALTER TABLE task_bodies VALIDATE CONSTRAINT task_bodies_id_fkey
-- checks them at any later time without blocking writes.
CREATE TABLE task_bodies (
    id               TEXT NOT NULL,
    prompt           TEXT NOT NULL,
    allowed_verdicts TEXT NOT NULL,
    context          TEXT,
    display          TEXT
);
INSERT INTO task_bodies (id, prompt, allowed_verdicts, context, display)
    SELECT id, prompt, allowed_verdicts, context, display FROM tasks;
ALTER TABLE task_bodies ADD CONSTRAINT task_bodies_pkey PRIMARY KEY (id);
-- From here tasks is locked until the migration commits.
ALTER TABLE tasks RENAME TO task_states;
-- A body is written once, with its task: only the tasks created during the
-- copy are missing.
INSERT INTO task_bodies (id, prompt, allowed_verdicts, context, display)
    SELECT s.id, s.prompt, s.allowed_verdicts, s.context, s.display FROM task_states s
    WHERE NOT EXISTS (SELECT 1 FROM task_bodies b WHERE b.id = s.id);
ALTER TABLE task_bodies ADD CONSTRAINT task_bodies_id_fkey FOREIGN KEY (id) REFERENCES task_states (id) NOT VALID;
ALTER TABLE task_states DROP COLUMN prompt, DROP COLUMN allowed_verdicts, DROP COLUMN context, DROP COLUMN display;
ALTER TABLE task_states SET (fillfactor = 70);
CREATE VIEW tasks AS
    SELECT s.id, s.account_id, s.status, s.task_type, s.source, s.touchpoint, b.prompt,
        b.allowed_verdicts, s.confidence_threshold, b.context, s.final_verdict, s.final_tier,
        s.final_confidence, s.created_at, s.completed_at, s.failures, s.run_after, s.lease_owner,
        s.lease_expires_at, s.deadline_at, s.expired_at, s.callback_url, s.audit_rate, s.audit_state,
        s.reserved_by, s.reserved_until, s.call_started_at, s.on_expiry, s.notify, b.display,
        s.review_rule, s.reviews_required, s.votes_open, s.alerts, s.alert_step, s.alert_at,
        s.escalated_at, s.escalation_rung
    FROM task_states s LEFT JOIN task_bodies b ON b.id = s.id;

-- +goose Down
DROP VIEW tasks;
ALTER TABLE task_states RESET (fillfactor);
ALTER TABLE task_states ADD COLUMN prompt TEXT, ADD COLUMN allowed_verdicts TEXT,
    ADD COLUMN context TEXT, ADD COLUMN display TEXT;
UPDATE task_states s SET prompt = b.prompt, allowed_verdicts = b.allowed_verdicts,
    context = b.context, display = b.display
    FROM task_bodies b WHERE b.id = s.id;
ALTER TABLE task_states ALTER COLUMN prompt SET NOT NULL, ALTER COLUMN allowed_verdicts SET NOT NULL;
DROP TABLE task_bodies;
ALTER TABLE task_states RENAME TO tasks;
