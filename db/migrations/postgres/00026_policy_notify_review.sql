-- +goose Up
-- What a policy fills beyond the create's numbers: its notify targets
-- ("slack:#refunds", comma-separated; '' for none) and its review
-- requirement (arbiter.ReviewRequirement as JSON; NULL for none).
ALTER TABLE policies ADD COLUMN notify TEXT NOT NULL DEFAULT '';
ALTER TABLE policies ADD COLUMN review_rule TEXT;

-- +goose Down
ALTER TABLE policies DROP COLUMN review_rule;
ALTER TABLE policies DROP COLUMN notify;
