-- +goose Up
-- Consensus reviews (arbiter.ReviewRequirement): a task's requirement as
-- JSON (NULL for today's single review); reviews_required, and votes_open,
-- how many people may hold the task on the desk at once, read by the
-- desk's queries. A vote is a human attempt with the person, once per
-- person and task (the unique index); review_slots are the desk's
-- reservations of tasks that ask several votes, one row per voter.
ALTER TABLE tasks ADD COLUMN review_rule TEXT;
ALTER TABLE tasks ADD COLUMN reviews_required INTEGER NOT NULL DEFAULT 1;
ALTER TABLE tasks ADD COLUMN votes_open INTEGER NOT NULL DEFAULT 1;
ALTER TABLE attempts ADD COLUMN person_id TEXT;
CREATE UNIQUE INDEX attempts_one_vote ON attempts (task_id, person_id) WHERE person_id IS NOT NULL;
CREATE TABLE review_slots (
    task_id        TEXT NOT NULL REFERENCES tasks (id),
    person_id      TEXT NOT NULL,
    reserved_until BIGINT NOT NULL,
    PRIMARY KEY (task_id, person_id)
);
CREATE INDEX review_slots_person ON review_slots (person_id);

-- +goose Down
DROP TABLE review_slots;
DROP INDEX attempts_one_vote;
ALTER TABLE attempts DROP COLUMN person_id;
ALTER TABLE tasks DROP COLUMN votes_open;
ALTER TABLE tasks DROP COLUMN reviews_required;
ALTER TABLE tasks DROP COLUMN review_rule;
