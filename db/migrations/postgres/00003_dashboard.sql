-- +goose Up
-- Dashboard sessions: the cookie holds the token, the store its SHA-256.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    method     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- E-mail sign-in links: single use, short-lived, stored hashed.
CREATE TABLE login_tokens (
    hash       TEXT PRIMARY KEY,
    email      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX login_tokens_expires ON login_tokens (expires_at);

CREATE TABLE audit_events (
    id         BIGSERIAL PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    kind       TEXT NOT NULL,
    actor      TEXT NOT NULL,
    detail     TEXT NOT NULL,
    client_ip  TEXT NOT NULL,
    user_agent TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX audit_events_account ON audit_events (account_id, id);

CREATE INDEX identities_account ON identities (account_id);

-- +goose Down
DROP INDEX identities_account;
DROP TABLE audit_events;
DROP TABLE login_tokens;
DROP TABLE sessions;
