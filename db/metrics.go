package db

import (
	"context"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// CountOpenTasks counts the tasks of every account that are not final, by
// status, for the metrics' gauge: each status by its own partial index, so
// the count never reads the completed tasks, however many there are. The
// demo's sample tasks are not counted.
func (d *DB) CountOpenTasks(ctx context.Context) (_ map[string]int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var pending, running, human int
	err = d.db.QueryRowContext(ctx, d.rebind(`SELECT
		(SELECT count(*) FROM tasks WHERE status = 'pending' AND account_id <> ?),
		(SELECT count(*) FROM tasks WHERE status = 'agent_running' AND account_id <> ?),
		(SELECT count(*) FROM tasks WHERE status = 'human_needed' AND account_id <> ?)`),
		arbiter.DemoAccountID, arbiter.DemoAccountID, arbiter.DemoAccountID).Scan(&pending, &running, &human)
	if err != nil {
		return nil, fmt.Errorf("count open tasks: %w", err)
	}
	return map[string]int{
		arbiter.StatusPending:      pending,
		arbiter.StatusAgentRunning: running,
		arbiter.StatusHumanNeeded:  human,
	}, nil
}
