-- +goose Up
-- Microsoft Teams (issue 48): an account's bot (its Azure Bot
-- registration's app id, one account a bot, and its client secret sealed
-- under ARBITER_SECRET_KEY, db/secrets.go), and the conversations the bot
-- was added to: a conversation reference (service URL and id) for posting
-- proactively, named for notify targets ("teams:finance/approvals").
CREATE TABLE teams_connections (
    account_id           TEXT PRIMARY KEY REFERENCES accounts (id),
    app_id               TEXT NOT NULL UNIQUE,
    client_secret        TEXT NOT NULL,
    tenant_id            TEXT NOT NULL,
    default_conversation TEXT NOT NULL DEFAULT '',
    created_at           BIGINT NOT NULL
);

CREATE TABLE teams_conversations (
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    id          TEXT NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    title       TEXT NOT NULL,
    service_url TEXT NOT NULL,
    added_at    BIGINT NOT NULL,
    PRIMARY KEY (account_id, id),
    UNIQUE (account_id, name)
);

-- +goose Down
DROP TABLE teams_conversations;
DROP TABLE teams_connections;
