-- +goose Up
-- Chat links (issue 41 item 6): a chat app's user (a Slack user of a
-- workspace, a Teams user of a tenant) decides as the person it is
-- linked to, and only that person links it, by signing in to Arbiter
-- with the address the chat app confirmed. An offer is a link shown to
-- the clicker, its token stored hashed, usable once within 15 minutes;
-- a chat user has at most one offer at a time.
CREATE TABLE chat_links (
    provider  TEXT NOT NULL,
    workspace TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    person_id TEXT NOT NULL REFERENCES people (id),
    linked_at INTEGER NOT NULL,
    PRIMARY KEY (provider, workspace, user_id)
);
CREATE INDEX chat_links_person ON chat_links (person_id);

CREATE TABLE chat_link_offers (
    token_hash TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    provider   TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    email      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX chat_link_offers_user ON chat_link_offers (provider, workspace, user_id);
CREATE INDEX chat_link_offers_expires ON chat_link_offers (expires_at);

-- +goose Down
DROP TABLE chat_link_offers;
DROP TABLE chat_links;
