package db_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// listAll walks the account's list page by page with f and returns the ids
// in the order seen and the number of pages.
func listAll(t *testing.T, d *db.DB, accountID string, f arbiter.TaskFilter) ([]string, int) {
	t.Helper()
	var ids []string
	pages := 0
	for {
		page, err := d.ListTasks(ctx, accountID, f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, task := range page.Tasks {
			ids = append(ids, task.ID)
		}
		next := page.Next()
		if next == nil {
			if page.HasMore {
				t.Fatal("HasMore without a next cursor")
			}
			return ids, pages
		}
		if pages > 1000 {
			t.Fatal("the walk does not end")
		}
		// The cursor goes through its URL form, as the dashboard's does.
		c, err := arbiter.ParseTaskCursor(next.String())
		if err != nil {
			t.Fatal(err)
		}
		f.After = &c
	}
}

func TestTaskService_ListTasks(t *testing.T) {
	t.Parallel()
	t.Run("CursorWalkVisitsEachTaskOnceNewestFirst", func(t *testing.T) {
		c := newClock()
		dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
			owner := newAccount(t, d, "owner@example.com")
			other := newAccount(t, d, "other@example.com")
			var want []string
			for i := range 250 {
				task, err := d.CreateTask(ctx, owner.ID, taskCreate(fmt.Sprint("task ", i)))
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, task.ID)
				// Five tasks share each millisecond, so the id must break ties.
				if i%5 == 4 {
					c.Add(time.Millisecond)
				}
				if i%50 == 0 {
					if _, err := d.CreateTask(ctx, other.ID, taskCreate("not yours")); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Newest first: by created_at, then by id, both descending.
			byKey := map[string]arbiter.TaskCursor{}
			for _, id := range want {
				task, _ := d.FindTaskByID(ctx, owner.ID, id)
				byKey[id] = arbiter.CursorOf(task)
			}
			slices.SortFunc(want, func(a, b string) int {
				ka, kb := byKey[a], byKey[b]
				if ka.CreatedAt != kb.CreatedAt {
					return int(kb.CreatedAt - ka.CreatedAt)
				}
				return strings.Compare(b, a)
			})

			for _, limit := range []int{0, 1, 7, 100} {
				got, pages := listAll(t, d, owner.ID, arbiter.TaskFilter{Limit: limit})
				if !slices.Equal(got, want) {
					t.Fatalf("limit %d: the walk saw %d tasks (%d distinct) in another order than newest first", limit, len(got), len(slices.Compact(slices.Sorted(slices.Values(got)))))
				}
				size := limit
				if size == 0 {
					size = arbiter.DefaultTaskPageSize
				}
				if wantPages := (250 + size - 1) / size; pages != wantPages {
					t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
				}
			}
			got, _ := listAll(t, d, other.ID, arbiter.TaskFilter{Limit: 100})
			if len(got) != 5 {
				t.Errorf("the other account lists %d tasks, want its own 5", len(got))
			}

			// The API's cursor: the id of the previous page's last task.
			var walked []string
			f := arbiter.TaskFilter{Limit: 7}
			for {
				page, err := d.ListTasks(ctx, owner.ID, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range page.Tasks {
					walked = append(walked, task.ID)
				}
				if !page.HasMore {
					break
				}
				f.StartingAfter = page.Tasks[len(page.Tasks)-1].ID
			}
			if !slices.Equal(walked, want) {
				t.Fatalf("the walk by starting_after saw %d tasks in another order than newest first", len(walked))
			}
		})
	})

	t.Run("ErrStartingAfterNotTheAccounts", func(t *testing.T) {
		dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
			owner := newAccount(t, d, "owner@example.com")
			other := newAccount(t, d, "other@example.com")
			theirs, err := d.CreateTask(ctx, other.ID, taskCreate("not yours"))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{theirs.ID, "tsk_0123456789abcdef", "tsk_demo_refund_late_delivery", "nope"} {
				_, err := d.ListTasks(ctx, owner.ID, arbiter.TaskFilter{StartingAfter: id})
				if wantCode(t, err, arbiter.EINVALID); !strings.Contains(arbiter.ErrorMessage(err), "starting_after") {
					t.Errorf("starting_after %s: %v", id, err)
				}
			}
			if page, err := d.ListTasks(ctx, other.ID, arbiter.TaskFilter{StartingAfter: theirs.ID}); err != nil || len(page.Tasks) != 0 {
				t.Errorf("after the account's only task: %+v, %v", page, err)
			}
		})
	})

	t.Run("Filters", func(t *testing.T) {
		c := newClock()
		dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
			owner := newAccount(t, d, "owner@example.com")
			other := newAccount(t, d, "other@example.com")
			mk := func(acct, source, taskType, touchpoint string) *arbiter.Task {
				t.Helper()
				in := taskCreate("p")
				in.Source, in.TaskType, in.Touchpoint = source, taskType, touchpoint
				task, err := d.CreateTask(ctx, acct, in)
				if err != nil {
					t.Fatal(err)
				}
				c.Add(time.Second)
				return task
			}
			a := mk(owner.ID, "bot", "refund", "chat")
			b := mk(owner.ID, "crm", "refund", "email")
			cTask := mk(owner.ID, "bot", "moderate", "chat")
			d1 := mk(owner.ID, "", "decide", "chat")
			mk(other.ID, "bot", "refund", "chat")

			// a completed by the agent, b sent to a human, cTask decided by one.
			claimed, err := d.ClaimTasks(ctx, "w", 10, time.Minute)
			if err != nil || len(claimed) != 5 {
				t.Fatalf("claimed %d tasks: %v", len(claimed), err)
			}
			if err := d.FinishAgentAttempt(ctx, "w", a.ID, decided("approve", 0.99)); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{b.ID, cTask.ID} {
				if err := d.FinishAgentAttempt(ctx, "w", id, arbiter.AgentStep{
					Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusHumanNeeded,
				}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := d.DecideTask(ctx, owner.ID, cTask.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			if err := d.ReleaseTasks(ctx, "w"); err != nil {
				t.Fatal(err)
			}

			ts := func(task *arbiter.Task, delta arbiter.Timestamp) *arbiter.Timestamp {
				v := task.CreatedAt + delta
				return &v
			}
			for _, tc := range []struct {
				name string
				f    arbiter.TaskFilter
				want []*arbiter.Task
			}{
				{"None", arbiter.TaskFilter{}, []*arbiter.Task{d1, cTask, b, a}},
				{"Status", arbiter.TaskFilter{Status: arbiter.StatusCompleted}, []*arbiter.Task{cTask, a}},
				{"StatusHumanNeeded", arbiter.TaskFilter{Status: arbiter.StatusHumanNeeded}, []*arbiter.Task{b}},
				{"StatusPending", arbiter.TaskFilter{Status: arbiter.StatusPending}, []*arbiter.Task{d1}},
				{"Source", arbiter.TaskFilter{Source: "bot"}, []*arbiter.Task{cTask, a}},
				{"SourceAndStatus", arbiter.TaskFilter{Source: "bot", Status: arbiter.StatusCompleted}, []*arbiter.Task{cTask, a}},
				{"SourceUnknown", arbiter.TaskFilter{Source: "nobody"}, nil},
				{"TaskType", arbiter.TaskFilter{TaskType: "refund"}, []*arbiter.Task{b, a}},
				{"Touchpoint", arbiter.TaskFilter{Touchpoint: "email"}, []*arbiter.Task{b}},
				{"FinalTierHuman", arbiter.TaskFilter{FinalTier: arbiter.TierHuman}, []*arbiter.Task{cTask}},
				{"FinalTierAgent", arbiter.TaskFilter{FinalTier: arbiter.TierAgent}, []*arbiter.Task{a}},
				{"CreatedAfter", arbiter.TaskFilter{CreatedAfter: ts(b, 0)}, []*arbiter.Task{d1, cTask}},
				{"CreatedBefore", arbiter.TaskFilter{CreatedBefore: ts(cTask, 0)}, []*arbiter.Task{b, a}},
				{"CreatedBetween", arbiter.TaskFilter{CreatedAfter: ts(a, 0), CreatedBefore: ts(d1, 0)}, []*arbiter.Task{cTask, b}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					page, err := d.ListTasks(ctx, owner.ID, tc.f)
					if err != nil {
						t.Fatal(err)
					}
					var got, want []string
					for _, task := range page.Tasks {
						got = append(got, task.ID)
					}
					for _, task := range tc.want {
						want = append(want, task.ID)
					}
					if !slices.Equal(got, want) || page.HasMore {
						t.Errorf("listed %v (more: %v), want %v", got, page.HasMore, want)
					}
				})
			}

			t.Run("AttemptsWithoutContext", func(t *testing.T) {
				page, err := d.ListTasks(ctx, owner.ID, arbiter.TaskFilter{Status: arbiter.StatusCompleted})
				if err != nil {
					t.Fatal(err)
				}
				human := page.Tasks[0]
				if human.ID != cTask.ID || len(human.Attempts) != 2 || human.Attempts[1].Tier != arbiter.TierHuman ||
					*human.FinalVerdict != "reject" || *human.FinalTier != arbiter.TierHuman || human.Source != "bot" {
					t.Errorf("listed task = %+v", human)
				}
				for _, task := range page.Tasks {
					if task.Context != nil {
						t.Errorf("a listed task carries its context %s", task.Context)
					}
				}
				if found, _ := d.FindTaskByID(ctx, owner.ID, cTask.ID); found.Context == nil {
					t.Error("the task has no context to leave out")
				}
			})
			t.Run("EmptyIsNotNil", func(t *testing.T) {
				fresh := newAccount(t, d, "fresh@example.com")
				page, err := d.ListTasks(ctx, fresh.ID, arbiter.TaskFilter{})
				if err != nil || page.Tasks == nil || len(page.Tasks) != 0 || page.HasMore || page.Next() != nil {
					t.Errorf("empty list = %+v, %v", page, err)
				}
			})
		})
	})

	t.Run("ErrInvalidFilter", func(t *testing.T) {
		dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
			acct := newAccount(t, d, "a@example.com")
			for _, f := range []arbiter.TaskFilter{
				{Status: "done"}, {Status: "COMPLETED"}, {FinalTier: "robot"},
				{Limit: -1}, {Limit: arbiter.MaxTaskPageSize + 1},
				{Source: strings.Repeat("s", arbiter.MaxLabelChars+1)}, {TaskType: "\xff"},
				{After: &arbiter.TaskCursor{CreatedAt: 1, ID: "'; DROP TABLE tasks; --"}},
			} {
				_, err := d.ListTasks(ctx, acct.ID, f)
				wantCode(t, err, arbiter.EINVALID)
			}
		})
	})
}

// TestTaskService_ListTasksUsesTheIndex proves that a page deep in the list
// costs what the first does: on tables of 40,000 tasks, the plan reads
// tasks_account_created in order, with the cursor in the index condition,
// and stops at the page's end; it neither scans nor sorts the tasks.
func TestTaskService_ListTasksUsesTheIndex(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		other := newAccount(t, d, "b@example.com")
		const n = 20000
		for _, id := range []string{acct.ID, other.ID} {
			if err := d.InsertTasks(ctx, id, n, 1763805600000); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Analyze(ctx); err != nil {
			t.Fatal(err)
		}
		deep, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Limit: 100})
		if err != nil || len(deep.Tasks) != 100 {
			t.Fatalf("listed %d tasks: %v", len(deep.Tasks), err)
		}
		after := arbiter.TaskCursor{CreatedAt: 1763805600000 + n/2, ID: deep.Tasks[0].ID}
		middle := deep.Tasks[50].ID
		for _, f := range []arbiter.TaskFilter{{}, {After: &after}, {After: &after, Source: "bot"}, {After: &after, Status: arbiter.StatusPending},
			{StartingAfter: middle}, {StartingAfter: middle, Status: arbiter.StatusPending}} {
			plan, err := d.ExplainListTasks(ctx, acct.ID, f)
			if err != nil {
				t.Fatal(err)
			}
			uses := strings.Contains(plan, "tasks_account_created")
			switch d.Dialect() {
			case db.SQLite:
				// SQLite walks the index backwards for the page's ORDER
				// BY; a temp B-tree inside the subquery would mean it
				// sorted the account's tasks. (The outer one sorts the
				// page's rows only.)
				if !uses || sqliteSubquerySorts(plan) {
					t.Errorf("filter %+v: the plan does not read the index in order:\n%s", f, plan)
				}
			case db.Postgres:
				if !uses || strings.Contains(plan, "Seq Scan on tasks") || strings.Contains(plan, "Sort Key: tasks.created_at") {
					t.Errorf("filter %+v: the plan scans or sorts the tasks:\n%s", f, plan)
				}
				if (f.After != nil || f.StartingAfter != "") && !strings.Contains(plan, "Index Cond: ((account_id = ") {
					t.Errorf("filter %+v: the cursor is not in the index condition:\n%s", f, plan)
				}
			}
		}
	})
}

// sqliteSubquerySorts reports whether an SQLite query plan (rows of id,
// parent, notused, detail) sorts inside the IN subquery.
func sqliteSubquerySorts(plan string) bool {
	subquery := ""
	for _, line := range strings.Split(plan, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		if strings.Contains(line, "LIST SUBQUERY") {
			subquery = fields[0]
		} else if subquery != "" && fields[1] == subquery && strings.Contains(line, "TEMP B-TREE") {
			return true
		}
	}
	return subquery == ""
}
