package db

// SweepStatement is a statement a periodic sweep runs to find its due
// tasks: its name and its SQL in the store's dialect, whose one argument
// is the most tasks it takes. The bench (cmd/arbiter-bench) explains each
// on a large table to show that a sweep reads what it takes, not the
// table.
type SweepStatement struct{ Name, SQL string }

// SweepStatements returns the statements of the deadline sweep
// (ExpireTasks) and the reminders and escalation sweep (FireDueAlerts)
// that find their due tasks, in the order they run them. A new sweep adds
// its own here.
func (d *DB) SweepStatements() []SweepStatement {
	return []SweepStatement{
		{Name: "due outcomes", SQL: d.dueOutcomesSQL()},
		{Name: "expire", SQL: d.rebind(d.expireTasksSQL())},
		{Name: "due alerts", SQL: d.dueAlertsSQL(d.sqlNowMS())},
	}
}
