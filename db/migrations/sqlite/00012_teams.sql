-- +goose Up
-- Teams (issue 17). People sign in; memberships give them a role in an
-- account. Every account that existed becomes one person, its owner, with
-- the account's address: the person's id is the account's with per_ for
-- acct_, so identities and sessions follow their account to its person.
-- Applied twice, the first CREATE fails and the whole migration rolls back.
CREATE TABLE people (
    id         TEXT PRIMARY KEY,
    email      TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE memberships (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    person_id  TEXT NOT NULL REFERENCES people (id),
    role       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, person_id)
);
CREATE INDEX memberships_person ON memberships (person_id, created_at);

INSERT INTO people (id, email, created_at)
    SELECT 'per_' || substr(id, 6), email, created_at FROM accounts WHERE id <> 'acct_demo';
INSERT INTO memberships (account_id, person_id, role, created_at)
    SELECT id, 'per_' || substr(id, 6), 'owner', created_at FROM accounts WHERE id <> 'acct_demo';

-- Identities belong to people now (SQLite rebuilds the table to change its
-- columns).
CREATE TABLE identities_new (
    id         TEXT PRIMARY KEY,
    person_id  TEXT NOT NULL REFERENCES people (id),
    provider   TEXT NOT NULL,
    subject    TEXT NOT NULL,
    email      TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    UNIQUE (provider, subject)
);
INSERT INTO identities_new (id, person_id, provider, subject, email, created_at)
    SELECT i.id, p.id, i.provider, i.subject, i.email, i.created_at
    FROM identities i JOIN people p ON p.id = 'per_' || substr(i.account_id, 6);
DROP TABLE identities;
ALTER TABLE identities_new RENAME TO identities;
CREATE INDEX identities_person ON identities (person_id);

-- A session is a person's; its account is the one they work in now (NULL
-- when they are a member of none).
CREATE TABLE sessions_new (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    person_id  TEXT NOT NULL REFERENCES people (id),
    account_id TEXT REFERENCES accounts (id),
    method     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
INSERT INTO sessions_new (id, hash, person_id, account_id, method, created_at, expires_at)
    SELECT s.id, s.hash, p.id, s.account_id, s.method, s.created_at, s.expires_at
    FROM sessions s JOIN people p ON p.id = 'per_' || substr(s.account_id, 6);
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_expires ON sessions (expires_at);
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
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    accepted_at INTEGER,
    revoked_at  INTEGER
);
CREATE INDEX invitations_account ON invitations (account_id, created_at);
CREATE INDEX invitations_email ON invitations (email);

-- Reservations on the desk: a task a reviewer opened is theirs until
-- reserved_until (by the database's clock).
ALTER TABLE tasks ADD COLUMN reserved_by TEXT;
ALTER TABLE tasks ADD COLUMN reserved_until INTEGER;
CREATE INDEX tasks_reserved_by ON tasks (reserved_by) WHERE reserved_by IS NOT NULL;

-- Account settings: how long a reservation lasts, and after how many
-- minutes of waiting reviewers are mailed (NULL: never).
ALTER TABLE accounts ADD COLUMN reservation_seconds INTEGER NOT NULL DEFAULT 600;
ALTER TABLE accounts ADD COLUMN notify_after_minutes INTEGER;

-- A session's skipped tasks go to the end of its reviewer's order.
CREATE TABLE session_skips (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    task_id    TEXT NOT NULL,
    skipped_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, task_id)
);

-- Reviewer digests: one row claims a reviewer's digest for an hour, before
-- it is sent, so two workers never send the same one.
CREATE TABLE digests (
    account_id TEXT NOT NULL REFERENCES accounts (id),
    person_id  TEXT NOT NULL REFERENCES people (id),
    hour       INTEGER NOT NULL,
    claimed_at INTEGER NOT NULL,
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
CREATE TABLE sessions_old (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    method     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
INSERT INTO sessions_old SELECT id, hash, account_id, method, created_at, expires_at FROM sessions WHERE account_id IS NOT NULL;
DROP TABLE sessions;
ALTER TABLE sessions_old RENAME TO sessions;
CREATE INDEX sessions_expires ON sessions (expires_at);
CREATE TABLE identities_old (
    id         TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    provider   TEXT NOT NULL,
    subject    TEXT NOT NULL,
    email      TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    UNIQUE (provider, subject)
);
INSERT INTO identities_old
    SELECT i.id, (SELECT min(m.account_id) FROM memberships m WHERE m.person_id = i.person_id), i.provider, i.subject, i.email, i.created_at
    FROM identities i WHERE EXISTS (SELECT 1 FROM memberships m WHERE m.person_id = i.person_id);
DROP TABLE identities;
ALTER TABLE identities_old RENAME TO identities;
CREATE INDEX identities_account ON identities (account_id);
DROP TABLE memberships;
DROP TABLE people;
