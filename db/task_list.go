package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// listTaskColumns is taskColumns with the context left out: a list never
// shows it, and a page of big contexts would cost megabytes.
var listTaskColumns = strings.Replace(taskColumns, "t.context", "CAST(NULL AS TEXT)", 1)

// ListTasks returns one page of the account's tasks, newest first, with
// their attempts and without their context. The page is a keyset over
// (created_at, id) on the index tasks_account_created, so a page deep in
// the list costs what the first one does. It reads the read pool
// (readPool): a task created in the replica's lag may not be listed yet.
func (d *DB) ListTasks(ctx context.Context, accountID string, f arbiter.TaskFilter) (_ arbiter.TaskPage, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if err := d.validateTaskFilter(ctx, accountID, &f); err != nil {
		return arbiter.TaskPage{}, err
	}
	query, args := listTasksQuery(accountID, f)
	rows, err := d.readPool().QueryContext(ctx, d.rebind(query), args...)
	if err != nil {
		return arbiter.TaskPage{}, fmt.Errorf("list tasks: %w", err)
	}
	tasks, err := scanTasksWithAttempts(rows)
	if err != nil {
		return arbiter.TaskPage{}, fmt.Errorf("list tasks: %w", err)
	}
	page := arbiter.TaskPage{Tasks: tasks}
	if len(tasks) > f.Limit {
		page.Tasks, page.HasMore = tasks[:f.Limit], true
	}
	if page.Tasks == nil {
		page.Tasks = []*arbiter.Task{}
	}
	return page, nil
}

// validateTaskFilter validates f and turns its StartingAfter into the
// position of that task. Returns EINVALID when the task is not one of the
// account's.
func (d *DB) validateTaskFilter(ctx context.Context, accountID string, f *arbiter.TaskFilter) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.StartingAfter == "" {
		return nil
	}
	var created int64
	err := d.readPool().QueryRowContext(ctx, d.rebind(`SELECT created_at FROM tasks WHERE id = ? AND account_id = ?`),
		f.StartingAfter, accountID).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		return arbiter.ErrStartingAfterUnknown
	} else if err != nil {
		return fmt.Errorf("find starting_after: %w", err)
	}
	f.After = &arbiter.TaskCursor{CreatedAt: arbiter.Timestamp(created), ID: f.StartingAfter}
	f.StartingAfter = ""
	return nil
}

// listTasksQuery returns the query of ListTasks for a validated filter, and
// its arguments. It asks for one task more than the page, which tells
// whether another page follows.
func listTasksQuery(accountID string, f arbiter.TaskFilter) (string, []any) {
	w := accountWhere(accountID)
	w.equal("status", f.Status)
	w.equal("task_type", f.TaskType)
	w.equal("source", f.Source)
	w.equal("touchpoint", f.Touchpoint)
	w.equal("final_tier", f.FinalTier)
	w.createdBetween(f.CreatedAfter, f.CreatedBefore)
	if f.After != nil {
		w.add("(created_at, id) < (?, ?)", int64(f.After.CreatedAt), f.After.ID)
	}
	args := append(w.args, f.Limit+1)
	return `SELECT ` + listTaskColumns + `, ` + attemptColumns + `
		FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
		WHERE t.id IN (SELECT id FROM tasks WHERE ` + w.String() + `
			ORDER BY created_at DESC, id DESC LIMIT ?)
		ORDER BY t.created_at DESC, t.id DESC, a.id`, args
}
