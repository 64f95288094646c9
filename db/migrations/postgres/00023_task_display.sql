-- +goose Up
-- A create's display hint (arbiter.Display) as JSON: which members of the
-- context the desk shows first, and with which view. NULL without one.
ALTER TABLE tasks ADD COLUMN display TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN display;
