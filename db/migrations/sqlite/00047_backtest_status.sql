-- +goose Up
-- A backtest started from the dashboard runs in the background: it is
-- stored running when it starts, done when its calls are stored (issue
-- 43 item 5). The runs the CLI stored before are done.
ALTER TABLE backtest_runs ADD COLUMN status TEXT NOT NULL DEFAULT 'done';

-- +goose Down
ALTER TABLE backtest_runs DROP COLUMN status;
