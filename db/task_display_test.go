package db_test

import (
	"encoding/json"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestTaskService_Display: a create's display hint is stored and read back
// with the task, by id, in a list and in the review queue, whichever way
// the create is stored (alone, grouped with others, in a batch); a task
// without one reads none.
func TestTaskService_Display(t *testing.T) {
	t.Parallel()
	display := &arbiter.Display{Fields: []arbiter.DisplayField{{Field: "amount", View: "money"}, {Field: "note"}}}
	want, _ := json.Marshal(display)
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "display@example.com")
		hinted := taskCreate("hinted")
		hinted.Display = display
		one, err := d.CreateTask(ctx, acct.ID, hinted)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{hinted, taskCreate("plain")})
		if err != nil || batch[0].Err != nil || batch[1].Err != nil {
			t.Fatalf("batch: %v, %+v", err, batch)
		}
		// Postgres stores concurrent creates as one group (task_group.go).
		others := []string{"other1@example.com", "other2@example.com"}
		var group []*arbiter.Task
		if d.Dialect() == db.Postgres {
			var errs []error
			group, errs = d.StoreGroup(ctx, []string{newAccount(t, d, others[0]).ID, newAccount(t, d, others[1]).ID}, hinted)
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		check := func(name string, task *arbiter.Task, hinted bool) {
			t.Helper()
			got, _ := json.Marshal(task.Display)
			if hinted && string(got) != string(want) || !hinted && task.Display != nil {
				t.Errorf("%s reads display %s, want %v", name, got, hinted)
			}
		}
		check("the created task", one, true)
		for name, id := range map[string]string{"alone": one.ID, "in a batch": batch[0].Task.ID} {
			found, err := d.FindTaskByID(ctx, acct.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			check("the task stored "+name, found, true)
		}
		for i, task := range group {
			found, err := d.FindTaskByID(ctx, task.AccountID, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			check("the task stored in a group by "+others[i], found, true)
		}
		plain, err := d.FindTaskByID(ctx, acct.ID, batch[1].Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		check("the task without a hint", plain, false)
		page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{})
		if err != nil || len(page.Tasks) != 3 {
			t.Fatalf("list: %d tasks, %v", len(page.Tasks), err)
		}
		for _, task := range page.Tasks {
			check("the listed task "+task.Prompt, task, task.Prompt == "hinted")
		}
	})
}
