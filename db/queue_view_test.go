package db_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestQueueService_TheDeskWalksTheView: in every view of the queue (its
// filters, oldest first or by deadline) the desk's previous and next links
// walk exactly the tasks the queue page lists, in its order, with their
// positions; a task outside the view has none and leads to the view's
// first; NextTask takes the view's first free task, and a bad view is
// refused.
func TestQueueService_TheDeskWalksTheView(t *testing.T) {
	t.Parallel()
	// Deadlines are compared with the database's clock: the store's starts
	// at the real time.
	c := &clock{now: time.Now()}
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct, ann, bob, _ := reviewTeam(t, d, c, 0)
		// Twelve waiting tasks: two types, two sources; some with
		// deadlines, the later ones nearer.
		for i := range 12 {
			in := taskCreate("task")
			in.TaskType = []string{"refund", "kyc"}[i%2]
			in.Source = []string{"bot", "crm", "crm"}[i%3]
			if i%4 != 0 {
				in.DeadlineSeconds = 7200 - 300*i
			}
			if _, err := d.CreateTask(ctx, acct.ID, in); err != nil {
				t.Fatal(err)
			}
			c.Add(time.Second)
		}
		route := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}
		var claimed []*arbiter.Task
		for len(claimed) < 12 {
			some, err := d.ClaimTasks(ctx, "w", 100, time.Minute)
			if err != nil || len(some) == 0 {
				t.Fatalf("claimed %d of 12 (%v)", len(claimed), err)
			}
			for _, task := range some {
				if err := d.FinishAgentAttempt(ctx, "w", task.ID, route); err != nil {
					t.Fatal(err)
				}
			}
			claimed = append(claimed, some...)
		}
		views := []arbiter.QueueView{
			{},
			{Order: arbiter.QueueByDeadline},
			{TaskType: "refund"},
			{TaskType: "kyc", Order: arbiter.QueueByDeadline},
			{Source: "crm", Touchpoint: "chat"},
			{TaskType: "refund", Source: "bot", Order: arbiter.QueueByDeadline},
			{TaskType: "none"},
		}
		for _, view := range views {
			listed, total, err := d.ListHumanQueue(ctx, acct.ID, view, 100)
			if err != nil || total != len(listed) {
				t.Fatalf("%+v: list %d of %d (%v)", view, len(listed), total, err)
			}
			want := taskIDs(listed)
			if view.TaskType != "none" && (len(want) == 0 || len(want) == 12 && view.Filtered()) {
				t.Fatalf("%+v lists %d tasks: the fixture does not test the view", view, len(want))
			}
			// Forward from the first by Next, and back from the last by Prev.
			var forward, backward []string
			for id, pos := first(t, d, acct.ID, view), 1; id != ""; pos++ {
				p, err := d.FindQueuePlace(ctx, acct.ID, id, ann.PersonID, view)
				if err != nil || p.Position != pos || p.Total != len(want) {
					t.Fatalf("%+v: place of %s = %+v (%v), want position %d of %d", view, id, p, err, pos, len(want))
				}
				forward = append(forward, id)
				id = p.Next
			}
			for id := lastOf(want); id != ""; {
				backward = append(backward, id)
				p, err := d.FindQueuePlace(ctx, acct.ID, id, ann.PersonID, view)
				if err != nil {
					t.Fatal(err)
				}
				id = p.Prev
			}
			slices.Reverse(backward)
			if !slices.Equal(forward, want) || !slices.Equal(backward, want) {
				t.Errorf("%+v: next walks %v, previous %v; the queue lists %v", view, forward, backward, want)
			}
			// A task outside the view stands nowhere in it and leads to its first.
			if view.Filtered() {
				var outside string
				for _, id := range taskIDs(claimed) {
					if !slices.Contains(want, id) {
						outside = id
					}
				}
				p, err := d.FindQueuePlace(ctx, acct.ID, outside, ann.PersonID, view)
				if err != nil || p.Position != 0 || p.Prev != "" || p.Next != firstOf(want) {
					t.Errorf("%+v: the place of a task outside it = %+v (%v)", view, p, err)
				}
			}
			// NextTask takes the view's first task nobody else holds: Bob
			// holds the first, so Ann gets the second.
			if len(want) >= 2 {
				if _, err := d.ReserveTask(ctx, acct.ID, want[0], bob.PersonID); err != nil {
					t.Fatal(err)
				}
				if got, err := nextTaskID(d, acct.ID, ann.PersonID, ann.ID, view); err != nil || got != want[1] {
					t.Errorf("%+v: Ann's next = %s (%v), want %s", view, got, err, want[1])
				}
				for _, id := range want[:2] {
					for _, p := range []string{ann.PersonID, bob.PersonID} {
						if err := d.ReleaseTask(ctx, acct.ID, id, p, "", false); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
		for _, bad := range []arbiter.QueueView{{Order: "newest"}, {TaskType: string(make([]byte, 300))}} {
			_, err := d.FindQueuePlace(ctx, acct.ID, claimed[0].ID, ann.PersonID, bad)
			wantCode(t, err, arbiter.EINVALID)
			_, err = d.NextTask(ctx, acct.ID, ann.PersonID, ann.ID, bad)
			wantCode(t, err, arbiter.EINVALID)
		}
	})
}

// first returns the view's first task, which a task outside the view
// leads to.
func first(t *testing.T, d *db.DB, accountID string, view arbiter.QueueView) string {
	t.Helper()
	p, err := d.FindQueuePlace(ctx, accountID, "tsk_0000000000000000", "", view)
	if err != nil || p.Position != 0 {
		t.Fatalf("the place of no task = %+v (%v)", p, err)
	}
	return p.Next
}

func firstOf(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func lastOf(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[len(ids)-1]
}

// TestQueueService_TheDeskStepsAlongTheIndexes: on a queue of 20,000 tasks
// (10,000 with a deadline) beside another account's, a task's neighbours in
// each order are steps along that order's partial index, not a sort of
// the queue, and the task's position and the queue's length are counted
// along that index alone (migration 00031; before, over 50,000 waiting
// tasks, the counts of a desk page took 7.7 ms of the database's time as
// scans of the rows).
func TestQueueService_TheDeskStepsAlongTheIndexes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "deep@example.com")
		other := newAccount(t, d, "other@example.com")
		const n = 20000
		for _, id := range []string{acct.ID, other.ID} {
			if err := d.InsertTasks(ctx, id, n, 1763805600000); err != nil {
				t.Fatal(err)
			}
			if err := d.QueueAll(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Exec(ctx, `UPDATE task_states SET deadline_at = created_at + 86400000 - (created_at % 1000) * 60000
			WHERE account_id = ? AND created_at % 2 = 0`, acct.ID); err != nil {
			t.Fatal(err)
		}
		// As autovacuum leaves a live database: the position's count
		// reads the index alone where vacuum has marked the pages.
		if err := d.Vacuum(ctx); err != nil {
			t.Fatal(err)
		}
		listed, _, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, n/2+1)
		if err != nil || len(listed) != n/2+1 {
			t.Fatalf("listed %d (%v)", len(listed), err)
		}
		middle := listed[n/2].ID
		for index, view := range map[string]arbiter.QueueView{
			"tasks_review_queue_escalated": {},
			"tasks_review_queue_deadline":  {Order: arbiter.QueueByDeadline},
		} {
			plan, err := d.ExplainQueuePlace(ctx, acct.ID, middle, view)
			if err != nil {
				t.Fatal(err)
			}
			count, err := d.ExplainQueueCount(ctx, acct.ID, view)
			if err != nil {
				t.Fatal(err)
			}
			switch d.Dialect() {
			case db.Postgres:
				if !strings.Contains(plan, "Index Scan Backward using "+index+" ") || !strings.Contains(plan, "Index Scan using "+index+" ") ||
					strings.Contains(plan, "Sort Key") {
					t.Errorf("%+v: the neighbours are not index steps along %s:\n%s", view, index, plan)
				}
				if !strings.Contains(plan, "Index Only Scan using "+index+" ") || strings.Contains(plan, "Seq Scan") {
					t.Errorf("%+v: the position is not counted along %s alone:\n%s", view, index, plan)
				}
				if !strings.Contains(count, "Index Only Scan using "+index+" ") || strings.Contains(count, "Seq Scan") || strings.Contains(count, "Sort Key") {
					t.Errorf("%+v: the queue is not counted along %s alone:\n%s", view, index, count)
				}
			case db.SQLite:
				if !strings.Contains(plan, "USING INDEX "+index+" ") || strings.Contains(plan, "TEMP B-TREE") {
					t.Errorf("%+v: the neighbours are not read along %s:\n%s", view, index, plan)
				}
				if !strings.Contains(plan, "USING COVERING INDEX "+index+" ") {
					t.Errorf("%+v: the position is not counted along %s alone:\n%s", view, index, plan)
				}
				if !strings.Contains(count, "USING COVERING INDEX "+index+" ") || strings.Contains(count, "TEMP B-TREE") {
					t.Errorf("%+v: the queue is not counted along %s alone:\n%s", view, index, count)
				}
			}
		}
	})
}
