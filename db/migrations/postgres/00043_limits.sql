-- +goose Up
-- The limits every process of a deployment shares (internal/limits,
-- issue 45): a rate limit's bucket per key as its theoretical arrival
-- time (µs since the epoch, the database's clock); a slot limit's slots
-- per key, with how many each process holds, so that the slots of a
-- process that died are given back once its heartbeat lapses; and small
-- states several processes change in turns (a verifier provider's
-- limiter). UNLOGGED: no write-ahead log, no flush at commit and no wait
-- for a synchronous standby; a crash or a failover empties them, which
-- restarts every limit full, never beyond what it states.
CREATE UNLOGGED TABLE limit_buckets (
    key TEXT PRIMARY KEY,
    tat BIGINT NOT NULL
);

CREATE UNLOGGED TABLE limit_slots (
    key     TEXT PRIMARY KEY,
    held    INTEGER NOT NULL,
    holders JSONB NOT NULL
);

CREATE UNLOGGED TABLE limit_processes (
    process    TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);

CREATE UNLOGGED TABLE limit_states (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- +goose Down
DROP TABLE limit_states;
DROP TABLE limit_processes;
DROP TABLE limit_slots;
DROP TABLE limit_buckets;
