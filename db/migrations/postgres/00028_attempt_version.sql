-- +goose Up
-- The verifier version label (ARBITER_AGENT_VERSION) of an agent attempt,
-- NULL for a person and when none was set; and of a labelled pair, the
-- label of the agent's answer it pairs ('' for none), so the calibration
-- report splits and filters by it as by model.
ALTER TABLE attempts ADD COLUMN version TEXT;
ALTER TABLE labelled_pairs ADD COLUMN version TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE labelled_pairs DROP COLUMN version;
ALTER TABLE attempts DROP COLUMN version;
