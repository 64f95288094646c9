package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// taskFor stores a pending task for the account of email.
func taskFor(t *testing.T, store *db.DB, email, prompt, source, context string) *arbiter.Task {
	t.Helper()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	in := arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", Source: source}
	if context != "" {
		in.Context = []byte(context)
	}
	task, err := store.CreateTask(ctx, acct.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

var taskRowPattern = regexp.MustCompile(`data-testid="task-row" data-task-id="(tsk_[0-9a-z_]+)"`)

// listedIDs returns the task ids of a list page, in order.
func listedIDs(body string) []string {
	var ids []string
	for _, m := range taskRowPattern.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

var olderPattern = regexp.MustCompile(`href="(/tasks\?[^"]*)" class="btn-secondary" data-testid="older-page"`)

func TestDashboardTasks_List(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		// The oldest waits for a human; the 30 newer ones are pending.
		waiting := humanTask(t, d.store, "alice@example.com", "Waiting one", "")
		d.clock.Advance(time.Second)
		mine := []string{waiting.ID} // newest first
		for i := range 30 {
			source := "bot"
			if i%3 == 0 {
				source = "crm <import>"
			}
			task := taskFor(t, d.store, "alice@example.com", fmt.Sprintf("Refund %02d?", i), source, "")
			mine = slices.Insert(mine, 0, task.ID)
			d.clock.Advance(time.Second)
		}
		bobs := taskFor(t, d.store, "bob@example.com", "Bob's refund", "bot", "")
		alice := d.browser()
		alice.signIn("alice@example.com")

		// The first page: the newest 25, with the columns and the nav entry.
		r := alice.get("/tasks")
		wantStatus(t, r, http.StatusOK)
		if got := listedIDs(r.body); !slices.Equal(got, mine[:25]) {
			t.Fatalf("the first page lists %v, want the newest 25 %v", got, mine[:25])
		}
		for _, want := range []string{`href="/tasks" aria-current="page"`, "Refund 29?", "crm &lt;import&gt;", "Pending", `data-label="Verdict"`, `data-label="Age"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the list lacks %s", want)
			}
		}
		if strings.Contains(r.body, "Bob") || strings.Contains(r.body, bobs.ID) {
			t.Error("the list shows another account's task")
		}
		if strings.Contains(r.body, `data-testid="newest-page"`) {
			t.Error("the first page links to the first page")
		}

		// The next page through the opaque cursor: the other 6, and the end.
		m := olderPattern.FindStringSubmatch(r.body)
		if m == nil {
			t.Fatal("the first page has no link to older tasks")
		}
		if strings.Contains(m[1], "tsk_") {
			t.Errorf("the cursor %s shows a task id; it should be opaque", m[1])
		}
		r = alice.get(strings.ReplaceAll(m[1], "&amp;", "&"))
		wantStatus(t, r, http.StatusOK)
		if got := listedIDs(r.body); !slices.Equal(got, mine[25:]) {
			t.Errorf("the second page lists %v, want %v", got, mine[25:])
		}
		if olderPattern.MatchString(r.body) || !strings.Contains(r.body, `data-testid="newest-page"`) {
			t.Error("the last page links to older tasks, or not back to the newest")
		}

		// Filters by source and by status, kept across pages.
		r = alice.get("/tasks?source=" + url.QueryEscape("crm <import>"))
		wantStatus(t, r, http.StatusOK)
		got := listedIDs(r.body)
		if len(got) != 10 || !strings.Contains(r.body, `value="crm &lt;import&gt;"`) {
			t.Errorf("source filter lists %d tasks, want 10", len(got))
		}
		if r := alice.get("/tasks?status=completed"); len(listedIDs(r.body)) != 0 || !strings.Contains(r.body, "No tasks match") {
			t.Errorf("status filter: %d tasks listed, want none with a notice", len(listedIDs(r.body)))
		}
		r = alice.get("/tasks?status=pending&source=bot")
		if n := len(listedIDs(r.body)); n != 20 || !strings.Contains(r.body, `<option value="pending" selected>`) {
			t.Errorf("status and source filters list %d tasks, want 20", n)
		}
		if m := olderPattern.FindStringSubmatch(r.body); m != nil {
			t.Errorf("20 tasks fit one page, yet it links to %s", m[1])
		}
		if r := alice.get("/tasks?status=human_needed"); !slices.Equal(listedIDs(r.body), []string{waiting.ID}) || !strings.Contains(r.body, "Waiting for a human") {
			t.Errorf("human_needed filter lists %d tasks", len(listedIDs(r.body)))
		}
	})
}

func TestDashboardTasks_ErrBadFilter(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		taskFor(t, d.store, "alice@example.com", "Refund?", "", "")
		alice := d.browser()
		alice.signIn("alice@example.com")
		for _, tc := range []struct{ query, says string }{
			{"status=done", "status must be one of"},
			{"after=not-a-cursor", "cursor is not valid"},
			{"after=" + arbiter.TaskCursor{CreatedAt: 1, ID: "x"}.String(), "cursor is not valid"},
			{"source=" + strings.Repeat("s", arbiter.MaxLabelChars+1), "source must be"},
			{"source=a%00b", "source must not contain NUL"},
		} {
			r := alice.get("/tasks?" + tc.query)
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(r.body, tc.says) || !strings.Contains(r.body, `data-testid="task-filters"`) {
				t.Errorf("%s: the page does not say %q beside the filters:\n%.1500s", tc.query, tc.says, r.body)
			}
		}
	})
}

func TestDashboardTask_Detail(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "Refund <b>order</b> 7?", `{"order":7,"note":"line one\nline two"}`)
		bobs := taskFor(t, d.store, "bob@example.com", "Bob's refund", "", `{"secret":"bob"}`)
		alice := d.browser()
		alice.signIn("alice@example.com")

		r := alice.get("/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{
			"Refund &lt;b&gt;order&lt;/b&gt; 7?", "Waiting for a human", `data-testid="task-attempt"`, "not sure",
			`data-testid="task-context"`, `tabindex="0" role="region"`, `href="/review/tasks/` + task.ID + `"`,
			`href="/tasks" aria-current="page"`,
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the task page lacks %s", want)
			}
		}

		// Another account's task, an unknown and a malformed id: 404 alike.
		for _, id := range []string{bobs.ID, "tsk_0000000000000000", "nope", "tsk_demo_refund_late_delivery"} {
			r := alice.get("/tasks/" + id)
			wantStatus(t, r, http.StatusNotFound)
			if strings.Contains(r.body, "secret") || strings.Contains(r.body, "Bob") {
				t.Errorf("the 404 for %s shows the task", id)
			}
		}

		// Signed out, the pages ask to sign in.
		if r := d.browser().get("/tasks"); r.status != http.StatusSeeOther && r.status != http.StatusFound {
			t.Errorf("signed out, /tasks answers %d", r.status)
		}
	})
}

func TestDashboardTask_ContextIsTheDesksTree(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		items := make([]string, 300)
		for i := range items {
			items[i] = fmt.Sprintf(`"line %d"`, i)
		}
		task := taskFor(t, d.store, "alice@example.com", "Big?", "", `{"diff":"--- a\n+++ b","items":[`+strings.Join(items, ",")+`]}`)
		alice := d.browser()
		alice.signIn("alice@example.com")
		r := alice.get("/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		// The desk's bounded tree: a focusable scrolling box, line breaks
		// kept, and long arrays folded behind "show more".
		for _, want := range []string{`class="ctx" tabindex="0" role="region"`, "--- a\n+++ b", "ctx-more", ">line 299<"} {
			if !strings.Contains(strings.ReplaceAll(r.body, "&#34;", `"`), want) {
				t.Errorf("the task's context lacks %s", want)
			}
		}
	})
}
