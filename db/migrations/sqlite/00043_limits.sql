-- +goose Up
-- The limits every process of a Postgres deployment shares live in
-- tables of their own there (internal/limits, issue 45). SQLite serves
-- one process, which keeps its limits in memory: nothing to create.
SELECT 1;

-- +goose Down
SELECT 1;
