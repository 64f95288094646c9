-- +goose Up
-- Teams (issue 17). People sign in; memberships give them a role in an
-- account. Every account that existed becomes one person, its owner, with
-- the account's address: the person's id is the account's with per_ for
-- acct_, so identities and sessions follow their account to its person.
CREATE TABLE people (
    id         TEXT PRIMARY KEY,
    email      TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE memberships (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    person_id  TEXT NOT NULL REFERENCES people (id),
    role       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, person_id)
);
CREATE INDEX memberships_person ON memberships (person_id, created_at);

INSERT INTO people (id, email, created_at)
    SELECT 'per_' || substr(id, 6), email, created_at FROM accounts WHERE id <> 'acct_demo';
INSERT INTO memberships (account_id, person_id, role, created_at)
    SELECT id, 'per_' || substr(id, 6), 'owner', created_at FROM accounts WHERE id <> 'acct_demo';

-- Identities belong to people now.
ALTER TABLE identities ADD COLUMN person_id TEXT REFERENCES people (id);
UPDATE identities SET person_id = 'per_' || substr(account_id, 6)
    WHERE account_id <> 'acct_demo';
DELETE FROM identities WHERE person_id IS NULL;
ALTER TABLE identities ALTER COLUMN person_id SET NOT NULL;
ALTER TABLE identities DROP COLUMN account_id;
CREATE INDEX identities_person ON identities (person_id);

-- A session is a person's; its account is the one they work in now (NULL
-- when they are a member of none).
ALTER TABLE sessions ADD COLUMN person_id TEXT REFERENCES people (id);
UPDATE sessions SET person_id = 'per_' || substr(account_id, 6)
    WHERE account_id <> 'acct_demo';
DELETE FROM sessions WHERE person_id IS NULL;
ALTER TABLE sessions ALTER COLUMN person_id SET NOT NULL;
ALTER TABLE sessions ALTER COLUMN account_id DROP NOT NULL;
CREATE INDEX sessions_person ON sessions (person_id);

-- Invitations: a link (its token stored hashed) that joins an account with
-- a role, once, within seven days.
CREATE TABLE invitations (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    email       TEXT NOT NULL,
    role        TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    invited_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    accepted_at BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX invitations_account ON invitations (account_id, created_at);
CREATE INDEX invitations_email ON invitations (email);

-- Reservations on the desk: a task a reviewer opened is theirs until
-- reserved_until (by the database's clock).
ALTER TABLE tasks ADD COLUMN reserved_by TEXT;
ALTER TABLE tasks ADD COLUMN reserved_until BIGINT;
CREATE INDEX tasks_reserved_by ON tasks (reserved_by) WHERE reserved_by IS NOT NULL;

-- Account settings: how long a reservation lasts, and after how many
-- minutes of waiting reviewers are mailed (NULL: never).
ALTER TABLE accounts ADD COLUMN reservation_seconds INTEGER NOT NULL DEFAULT 600;
ALTER TABLE accounts ADD COLUMN notify_after_minutes INTEGER;

-- A session's skipped tasks go to the end of its reviewer's order.
CREATE TABLE session_skips (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    task_id    TEXT NOT NULL,
    skipped_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, task_id)
);

-- Reviewer digests: one row claims a reviewer's digest for an hour, before
-- it is sent, so two workers never send the same one.
CREATE TABLE digests (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    person_id  TEXT NOT NULL REFERENCES people (id),
    hour       BIGINT NOT NULL,
    claimed_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, person_id, hour)
);

-- +goose Down
DROP TABLE digests;
DROP TABLE session_skips;
DROP INDEX tasks_reserved_by;
ALTER TABLE accounts DROP COLUMN notify_after_minutes;
ALTER TABLE accounts DROP COLUMN reservation_seconds;
ALTER TABLE tasks DROP COLUMN reserved_until;
ALTER TABLE tasks DROP COLUMN reserved_by;
DROP TABLE invitations;
DELETE FROM sessions WHERE account_id IS NULL;
ALTER TABLE sessions ALTER COLUMN account_id SET NOT NULL;
ALTER TABLE sessions DROP COLUMN person_id;
ALTER TABLE identities ADD COLUMN account_id TEXT REFERENCES accounts (id);
UPDATE identities SET account_id = (SELECT min(m.account_id) FROM memberships m WHERE m.person_id = identities.person_id);
DELETE FROM identities WHERE account_id IS NULL;
ALTER TABLE identities ALTER COLUMN account_id SET NOT NULL;
ALTER TABLE identities DROP COLUMN person_id;
CREATE INDEX identities_account ON identities (account_id);
DROP TABLE memberships;
DROP TABLE people;
