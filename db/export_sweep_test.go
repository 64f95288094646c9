package db

import (
	"context"
	"database/sql"
	"strings"
)

// PlanScans explains query with args in a transaction it rolls back, with
// sequential scans discouraged as far as the store allows, and returns
// how the plan reads the tasks' state table (task_states): "seq" for a scan of the whole table,
// or the index it reads by.
func (d *DB) PlanScans(ctx context.Context, query string, args ...any) ([]string, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var scans []string
	if d.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return nil, err
		}
		rows, err := tx.QueryContext(ctx, `EXPLAIN (COSTS OFF) `+query, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return nil, err
			}
			switch {
			case strings.Contains(line, "Seq Scan on task_states"):
				scans = append(scans, "seq")
			case strings.Contains(line, " using ") && strings.Contains(line, " on task_states"):
				scans = append(scans, strings.Fields(line[strings.Index(line, " using ")+len(" using "):])[0])
			}
		}
		return scans, rows.Err()
	}
	rows, err := tx.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		detail := string(*vals[len(vals)-1].(*sql.RawBytes))
		switch f := strings.Fields(detail); {
		case len(f) >= 2 && f[0] == "SCAN" && f[1] == "task_states" && !strings.Contains(detail, "INDEX"):
			scans = append(scans, "seq")
		case len(f) >= 2 && (f[0] == "SEARCH" || f[0] == "SCAN") && f[1] == "task_states" && strings.Contains(detail, "INDEX "):
			scans = append(scans, strings.Fields(detail[strings.Index(detail, "INDEX ")+len("INDEX "):])[0])
		}
	}
	return scans, rows.Err()
}
