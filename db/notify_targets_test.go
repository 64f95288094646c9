package db_test

import (
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestCreate_KeepsTheNotifyList: a create's notify list is stored with
// its task, alone, grouped (StoreGroup) and in a batch, and a create
// without one stores none.
func TestCreate_KeepsTheNotifyList(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "notify@example.com")
		in := taskCreate("p")
		in.Notify = []string{"slack:#a", "slack:C0123456"}
		one, err := d.CreateTask(ctx, a.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{one.ID: "slack:#a,slack:C0123456"}
		if d.Dialect() == db.Postgres { // SQLite does not group creates
			grouped, errs := d.StoreGroup(ctx, []string{a.ID, a.ID}, in)
			for i, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
				want[grouped[i].ID] = "slack:#a,slack:C0123456"
			}
		}
		batch, err := d.CreateTasks(ctx, a.ID, []arbiter.TaskCreate{in, taskCreate("plain")})
		if err != nil {
			t.Fatal(err)
		}
		want[batch[0].Task.ID], want[batch[1].Task.ID] = "slack:#a,slack:C0123456", ""
		for id, w := range want {
			rows, err := d.Rows(ctx, `SELECT notify FROM tasks WHERE id = ?`, id)
			if err != nil || len(rows) != 1 {
				t.Fatalf("%s: %v %v", id, rows, err)
			}
			got := rows[0][0]
			if b, ok := got.([]byte); ok {
				got = string(b)
			}
			if got != w {
				t.Errorf("task %s stored notify %q, want %q", id, got, w)
			}
		}
	})
}
