package db

import (
	"strings"

	"github.com/arbiterhq/arbiter"
)

// where builds the WHERE clause of a filter: conditions joined by AND,
// with their ? arguments in order. The task list and the calibration
// report build theirs with it.
type where struct {
	conds []string
	args  []any
}

// accountWhere starts the clause of the account's rows.
func accountWhere(accountID string) *where {
	return &where{conds: []string{"account_id = ?"}, args: []any{accountID}}
}

// add adds a condition and its arguments.
func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

// equal adds column = value, unless value is "" (no filter).
func (w *where) equal(column, value string) {
	if value != "" {
		w.add(column+" = ?", value)
	}
}

// createdBetween adds created_at > after and created_at < before, each
// when set.
func (w *where) createdBetween(after, before *arbiter.Timestamp) {
	if after != nil {
		w.add("created_at > ?", int64(*after))
	}
	if before != nil {
		w.add("created_at < ?", int64(*before))
	}
}

// String is the clause, without WHERE.
func (w *where) String() string { return strings.Join(w.conds, " AND ") }
