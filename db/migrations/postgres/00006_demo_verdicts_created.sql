-- +goose Up
-- The worker prunes demo verdicts by age and keeps the newest; both read
-- them in created_at order.
CREATE INDEX demo_verdicts_created ON demo_verdicts (created_at, id);

-- +goose Down
DROP INDEX demo_verdicts_created;
