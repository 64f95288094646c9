-- +goose Up
-- Decision links (issue 31): one per person, task and verdict, mailed in
-- digests; the token is stored hashed. used_at ends a link, and every
-- other link of the same person and task with it.
CREATE TABLE decision_links (
    token_hash TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    task_id    TEXT NOT NULL,
    person_id  TEXT NOT NULL,
    verdict    TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX decision_links_task_person ON decision_links (task_id, person_id);
CREATE INDEX decision_links_expires ON decision_links (expires_at);

-- +goose Down
DROP TABLE decision_links;
