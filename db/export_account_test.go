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
