-- +goose Up
-- Whether each migration is additive, written by the release that
-- migrates (db.breakingMigrations), so that an older release, which does
-- not know the migrations applied after it, can tell whether it may serve
-- the schema: it may when every one it does not know is additive.
CREATE TABLE schema_changes (
    version  INTEGER PRIMARY KEY,
    additive INTEGER NOT NULL
);

-- +goose Down
DROP TABLE schema_changes;
