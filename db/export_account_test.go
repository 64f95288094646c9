package db

import (
	"context"
	"fmt"
)

// Count returns the single number query answers, for tests that check what
// a change left in the tables.
func (d *DB) Count(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	if err := d.db.QueryRowContext(ctx, d.rebind(query), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// Rows returns every row query answers, each as its columns' values.
func (d *DB) Rows(ctx context.Context, query string, args ...any) ([][]any, error) {
	rows, err := d.db.QueryxContext(ctx, d.rebind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		r, err := rows.SliceScan()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
