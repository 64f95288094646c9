package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// taskList is the answer of GET /v1/tasks.
type taskList struct {
	Tasks []struct {
		ID        string  `json:"id"`
		Status    string  `json:"status"`
		CreatedAt float64 `json:"created_at"`
	} `json:"tasks"`
	HasMore bool `json:"has_more"`
}

// list reads GET /v1/tasks?query and fails the test unless it is 200.
func (a *api) list(key, query string) taskList {
	a.t.Helper()
	status, _, b := a.do("GET", "/v1/tasks?"+query, key, "")
	var l taskList
	if status != http.StatusOK || json.Unmarshal(b, &l) != nil || l.Tasks == nil {
		a.t.Fatalf("GET /v1/tasks?%s = %d %s", query, status, b)
	}
	return l
}

func (l taskList) ids() []string {
	ids := []string{}
	for _, task := range l.Tasks {
		ids = append(ids, task.ID)
	}
	return ids
}

func TestTaskList_CursorWalkVisitsEachTaskOnce(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		owner, other := a.newKey("owner@example.com"), a.newKey("other@example.com")
		var created []string
		for i := range 250 {
			created = append(created, createTask(t, a, owner, goodTask)["id"].(string))
			if i%50 == 0 {
				createTask(t, a, other, goodTask)
			}
		}

		var walked []string
		query := url.Values{"limit": {"7"}}
		pages := 0
		var last float64
		for {
			page := a.list(owner, query.Encode())
			pages++
			for _, task := range page.Tasks {
				if last != 0 && task.CreatedAt > last {
					t.Fatalf("%s (created %.3f) follows a task created at %.3f: not newest first", task.ID, task.CreatedAt, last)
				}
				last = task.CreatedAt
			}
			walked = append(walked, page.ids()...)
			if !page.HasMore {
				break
			}
			if len(page.Tasks) != 7 || pages > 50 {
				t.Fatalf("page %d holds %d tasks with more to come", pages, len(page.Tasks))
			}
			query.Set("starting_after", page.Tasks[len(page.Tasks)-1].ID)
		}
		if len(walked) != 250 || pages != 36 {
			t.Fatalf("the walk saw %d tasks in %d pages, want 250 in 36", len(walked), pages)
		}
		if !slices.Equal(slices.Sorted(slices.Values(walked)), slices.Sorted(slices.Values(created))) {
			t.Fatal("the walk did not visit each of the account's tasks exactly once")
		}

		// The other account sees its own five and none of these.
		if theirs := a.list(other, "limit=100"); len(theirs.Tasks) != 5 || theirs.HasMore {
			t.Errorf("the other account lists %d tasks (more: %v), want its 5", len(theirs.Tasks), theirs.HasMore)
		} else {
			for _, id := range theirs.ids() {
				if slices.Contains(created, id) {
					t.Errorf("the other account lists %s", id)
				}
			}
		}
		// The default page is 20.
		if first := a.list(owner, ""); len(first.Tasks) != 20 || !first.HasMore || first.Tasks[0].ID != walked[0] {
			t.Errorf("the default page holds %d tasks (more: %v)", len(first.Tasks), first.HasMore)
		}
	})
}

func TestTaskList_Filters(t *testing.T) {
	t.Parallel()
	// Every reading of the store's clock is a second after the last, so
	// the tasks' creation times differ and the time filters have edges.
	var tick atomic.Int64
	opts := db.Options{Now: func() time.Time { return time.Unix(1795415525+tick.Add(1), 0) }}
	eachAPI(t, opts, func(t *testing.T, a *api) {
		key := a.newKey("owner@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "owner@example.com")
		mk := func(labels string) map[string]any {
			t.Helper()
			return createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["approve","reject"]`+labels+`}`)
		}
		refund := mk(`,"task_type":"refund","source":"bot","touchpoint":"email"`)
		human := mk(`,"task_type":"refund","source":"crm"`)
		pending := mk(`,"source":"bot"`)

		// refund is decided by the agent; human by a reviewer.
		claimed, err := a.store.ClaimTasks(ctx, "w", 2, time.Minute)
		if err != nil || len(claimed) != 2 {
			t.Fatalf("claimed %d: %v", len(claimed), err)
		}
		verdict, confidence, now := "approve", 0.99, arbiter.TimestampOf(time.Now())
		agent := arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence, StartedAt: now, FinishedAt: &now}
		if err := a.store.FinishAgentAttempt(ctx, "w", refund["id"].(string), arbiter.AgentStep{Attempt: agent, Next: arbiter.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
		if err := a.store.FinishAgentAttempt(ctx, "w", human["id"].(string), arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: now}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.DecideTask(ctx, account.ID, human["id"].(string), arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}

		at := func(task map[string]any) string { return fmt.Sprintf("%.3f", task["created_at"].(float64)) }
		id := func(task map[string]any) string { return task["id"].(string) }
		for _, tc := range []struct {
			query string
			want  []map[string]any
		}{
			{"", []map[string]any{pending, human, refund}},
			{"status=completed", []map[string]any{human, refund}},
			{"status=pending", []map[string]any{pending}},
			{"status=human_needed", nil},
			{"task_type=refund", []map[string]any{human, refund}},
			{"source=bot", []map[string]any{pending, refund}},
			{"source=bot&status=completed", []map[string]any{refund}},
			{"touchpoint=email", []map[string]any{refund}},
			{"touchpoint=chat", []map[string]any{pending, human}},
			{"final_tier=agent", []map[string]any{refund}},
			{"final_tier=human", []map[string]any{human}},
			{"created_after=" + at(refund), []map[string]any{pending, human}},
			{"created_before=" + at(pending), []map[string]any{human, refund}},
			{"created_after=" + at(refund) + "&created_before=" + at(pending), []map[string]any{human}},
			{"source=nobody", nil},
			{"limit=1&starting_after=" + id(pending), []map[string]any{human}},
		} {
			var want []string
			for _, task := range tc.want {
				want = append(want, id(task))
			}
			got := a.list(key, tc.query)
			if !slices.Equal(got.ids(), append([]string{}, want...)) {
				t.Errorf("?%s lists %v, want %v", tc.query, got.ids(), want)
			}
		}
		if l := a.list(key, "limit=1"); !l.HasMore || len(l.Tasks) != 1 {
			t.Errorf("limit=1 of 3: %d tasks, has_more %v", len(l.Tasks), l.HasMore)
		}
		if l := a.list(key, "limit=1&starting_after="+id(human)); l.HasMore || len(l.Tasks) != 1 {
			t.Errorf("the last page: %d tasks, has_more %v", len(l.Tasks), l.HasMore)
		}
	})
}

func TestTaskList_Errors(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key, other := a.newKey("owner@example.com"), a.newKey("other@example.com")
		theirs := createTask(t, a, other, goodTask)["id"].(string)
		for _, tc := range []struct{ query, mention string }{
			{"status=done", "status"},
			{"status=", "status"},
			{"status=pending&status=completed", "status"},
			{"final_tier=robot", "final_tier"},
			{"limit=0", "limit"},
			{"limit=101", "limit"},
			{"limit=abc", "limit"},
			{"created_after=yesterday", "created_after"},
			{"created_before=-5", "created_before"},
			{"starting_after=" + theirs, "starting_after"},
			{"starting_after=tsk_0123456789abcdef", "starting_after"},
			{"starting_after=tsk_demo_refund_late_delivery", "starting_after"},
			{"starting_after=nope", "starting_after"},
			{"order=asc", "order"},
			{"source=" + strings.Repeat("s", 201), "source"},
			{"source=a%00b", "source"}, // Postgres cannot compare text with NUL
			{"task_type=%00", "task_type"},
		} {
			status, h, b := a.do("GET", "/v1/tasks?"+tc.query, key, "")
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, tc.mention) {
				t.Errorf("?%.60s: %q does not name %s", tc.query, msg, tc.mention)
			}
		}
		status, h, b := a.do("GET", "/v1/tasks", "", "")
		wantError(t, status, h, b, http.StatusUnauthorized)
	})
}
