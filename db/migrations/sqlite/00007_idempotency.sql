-- +goose Up
-- Idempotency keys: the first create that uses a key stores it beside its
-- task, in the same statement or transaction, with the fingerprint of the
-- request; the worker deletes keys once expires_at has passed.
CREATE TABLE idempotency_keys (
    account_id      TEXT NOT NULL REFERENCES accounts (id),
    idempotency_key TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    task_id         TEXT NOT NULL REFERENCES tasks (id),
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (account_id, idempotency_key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
