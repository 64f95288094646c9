package db_test

import (
	"testing"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// Each sweep statement finds its due tasks by an index, on both stores, so
// that a sweep costs what it takes and not the table's size (issue 30; the
// bench measures it over a million tasks).
func TestSweepStatements_ReadByIndex(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		for i := range 20 {
			if _, err := d.CreateTask(ctx, acct.ID, withDeadline("t", 60+i)); err != nil {
				t.Fatal(err)
			}
		}
		statements := d.SweepStatements()
		if len(statements) == 0 {
			t.Fatal("no sweep statements")
		}
		for _, s := range statements {
			scans, err := d.PlanScans(ctx, s.SQL, 500)
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			t.Logf("%s reads tasks by %v", s.Name, scans)
			if len(scans) == 0 {
				t.Errorf("%s: the plan reads no tasks: %q", s.Name, s.SQL)
			}
			for _, scan := range scans {
				if scan == "seq" {
					t.Errorf("%s: the plan scans the whole tasks table (%v)", s.Name, scans)
				}
			}
		}
	})
}
