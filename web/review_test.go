package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// humanTask stores a task for the account and routes it to a human, as the
// worker does when the verifier is unsure.
func humanTask(t *testing.T, store *db.DB, email, prompt, context string) *arbiter.Task {
	t.Helper()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	in := arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email"}
	if context != "" {
		in.Context = []byte(context)
	}
	task, err := store.CreateTask(ctx, acct.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "not sure"}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

func TestReview_QueueIsTheAccounts(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		humanTask(t, d.store, "alice@example.com", "Alice's first refund", "")
		humanTask(t, d.store, "alice@example.com", "Alice's second refund", "")
		humanTask(t, d.store, "bob@example.com", "Bob's refund", "")
		alice := d.browser()
		alice.signIn("alice@example.com")

		for _, path := range []string{"/review", "/review/queue"} {
			r := alice.get(path)
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, "Alice&#39;s first refund") || !strings.Contains(r.body, "Alice&#39;s second refund") {
				t.Errorf("%s does not list Alice's tasks:\n%.1500s", path, r.body)
			}
			if strings.Contains(r.body, "Bob") {
				t.Errorf("%s shows another account's task", path)
			}
			if !strings.Contains(r.body, `data-testid="queue-count">2<`) {
				t.Errorf("%s does not count 2 waiting", path)
			}
		}
		// The navigation's count is live: it polls /review/count.
		if r := alice.get("/review/count"); r.status != http.StatusOK || strings.TrimSpace(r.body) != "2" {
			t.Errorf("/review/count = %d %q, want 2", r.status, r.body)
		}
		if r := alice.get("/keys"); !strings.Contains(r.body, `hx-get="/review/count"`) {
			t.Error("the navigation does not poll the review count")
		}
		humanTask(t, d.store, "alice@example.com", "Alice's third refund", "")
		if r := alice.get("/review/count"); strings.TrimSpace(r.body) != "3" {
			t.Errorf("/review/count after a new task = %q, want 3", r.body)
		}
		// The list polls for itself so new tasks appear without a reload.
		if r := alice.get("/review"); !strings.Contains(r.body, `hx-get="/review/queue"`) || !strings.Contains(r.body, `hx-trigger="every 5s"`) {
			t.Error("the queue does not poll")
		}
	})
}

func TestReview_Decide(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		first := humanTask(t, d.store, "alice@example.com", "First", "")
		second := humanTask(t, d.store, "alice@example.com", "Second", "")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")

		r := alice.get("/review/tasks/" + first.ID)
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{`data-shortcut="1"`, `value="approve"`, `value="reject"`, `action="/review/tasks/` + first.ID + `"`, `method="post"`, "not sure",
			`data-nav-up data-testid="back-to-queue"`, `hx-history="false"`, `role="status"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("task page lacks %s", want)
			}
		}
		// Back must ask the server: the task may have been decided since.
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("task page Cache-Control = %q, want no-store", cc)
		}

		// Without JavaScript: a redirect to the next task.
		r = alice.post("/review/tasks/"+first.ID, url.Values{"verdict": {"reject"}, "rationale": {"No receipt."}})
		wantStatus(t, r, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/review/tasks/"+second.ID {
			t.Errorf("after deciding, Location = %q, want the next task", loc)
		}
		if trigger := r.header.Get("HX-Trigger"); trigger != "" {
			t.Errorf("a plain form's decision triggers %q", trigger)
		}
		task, _ := d.store.FindTaskByID(ctx, acct.ID, first.ID)
		if task.Status != "completed" || *task.FinalTier != "human" || *task.FinalVerdict != "reject" || *task.FinalConfidence != 1 {
			t.Fatalf("decided task = %+v", task)
		}
		if a := task.Attempts[len(task.Attempts)-1]; *a.Reviewer != "alice@example.com" || a.Rationale != "No receipt." {
			t.Errorf("human attempt = %+v", a)
		}

		// Deciding again: refused with who decided, nothing changes.
		r = alice.post("/review/tasks/"+first.ID, url.Values{"verdict": {"approve"}})
		wantStatus(t, r, http.StatusConflict)
		if !strings.Contains(r.body, "already decided by alice@example.com") {
			t.Errorf("double decision page:\n%.1500s", r.body)
		}
		if again, _ := d.store.FindTaskByID(ctx, acct.ID, first.ID); *again.FinalVerdict != "reject" || len(again.Attempts) != len(task.Attempts) {
			t.Error("the second decision changed the task")
		}

		// A verdict outside the set, or none, is refused.
		wantStatus(t, alice.post("/review/tasks/"+second.ID, url.Values{"verdict": {"maybe"}}), http.StatusBadRequest)
		wantStatus(t, alice.post("/review/tasks/"+second.ID, url.Values{}), http.StatusBadRequest)

		// With htmx: the next task comes in place, as a fragment.
		third := humanTask(t, d.store, "alice@example.com", "Third", "")
		r = alice.do("POST", "/review/tasks/"+second.ID, url.Values{"verdict": {"approve"}}, map[string]string{"HX-Request": "true"})
		wantStatus(t, r, http.StatusOK)
		if strings.Contains(r.body, "<html") || !strings.Contains(r.body, `data-task-id="`+third.ID+`"`) ||
			r.header.Get("HX-Push-Url") != "/review/tasks/"+third.ID {
			t.Errorf("htmx decision answered %q with:\n%.800s", r.header.Get("HX-Push-Url"), r.body)
		}
		// The navigation's count refreshes on the event the decision triggers.
		if trigger := r.header.Get("HX-Trigger"); trigger != "queue-changed" {
			t.Errorf("htmx decision triggers %q, want queue-changed", trigger)
		}
		if r := alice.get("/review"); !strings.Contains(r.body, `hx-trigger="load, every 10s, queue-changed from:body"`) {
			t.Error("the navigation's count does not refresh on queue-changed")
		}
	})
}

func TestReview_OtherAccountsTaskIs404(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "Alice's secret", "")
		bob := d.browser()
		bob.signIn("bob@example.com")
		for _, r := range []response{
			bob.get("/review/tasks/" + task.ID),
			bob.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}}),
			bob.get("/review/tasks/tsk_0123456789abcdef"),
			bob.get("/review/tasks/not-an-id"),
		} {
			wantStatus(t, r, http.StatusNotFound)
			if strings.Contains(r.body, "Alice") {
				t.Error("the 404 page shows the task")
			}
		}
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Errorf("another account's post changed the task: %s", got.Status)
		}
	})
}

func TestReview_HostileContentIsText(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		hostile := `<script>alert(1)</script><img src=x onerror=alert(2)>`
		task := humanTask(t, d.store, "alice@example.com", hostile, `{"note":"<script>alert(3)</script>","html":"<img src=x onerror=alert(4)>"}`)
		alice := d.browser()
		alice.signIn("alice@example.com")
		for _, path := range []string{"/review/tasks/" + task.ID, "/review"} {
			r := alice.get(path)
			wantStatus(t, r, http.StatusOK)
			for _, raw := range []string{"<script>alert", "<img src=x"} {
				if strings.Contains(r.body, raw) {
					t.Errorf("%s renders %q as markup", path, raw)
				}
			}
			if !strings.Contains(r.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("%s does not show the prompt as text", path)
			}
		}
	})
}

func TestReview_NotSignedIn(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "p", "")
		visitor := d.browser()
		r := visitor.get("/review")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `href="/review/demo"`) || !strings.Contains(r.body, "/signin?next=%2Freview") {
			t.Errorf("welcome page lacks the demo and sign-in:\n%.1500s", r.body)
		}
		r = visitor.get("/review/tasks/" + task.ID)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/signin") {
			t.Errorf("a visitor opening a task got %d %s", r.status, r.header.Get("Location"))
		}
		wantStatus(t, visitor.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}}), http.StatusUnauthorized)
		wantStatus(t, visitor.get("/review/queue"), http.StatusNoContent)
	})
}

func TestReview_CrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "p", "")
		alice := d.browser()
		alice.signIn("alice@example.com")
		r := alice.do("POST", "/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}},
			map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
		wantStatus(t, r, http.StatusForbidden)
		r = alice.do("POST", "/review/demo/tasks/tsk_demo_refund_late_delivery", url.Values{"verdict": {"approve"}},
			map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
		wantStatus(t, r, http.StatusForbidden)
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Error("a cross-origin post decided the task")
		}
	})
}

func TestReview_Demo(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		visitor := d.browser()
		r := visitor.get("/review/demo")
		wantStatus(t, r, http.StatusSeeOther)
		first := r.header.Get("Location")
		var anon *http.Cookie
		for _, c := range visitor.c.Jar.Cookies(mustURL(t, d.url)) {
			if c.Name == "anon_session_id" {
				anon = c
			}
		}
		if anon == nil {
			t.Fatal("no anon_session_id cookie")
		}
		setCookie := r.header.Get("Set-Cookie")
		if !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Lax") {
			t.Errorf("anon cookie = %q, want HttpOnly and SameSite=Lax", setCookie)
		}

		r = visitor.get(first)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="demo-banner"`) || !strings.Contains(r.body, `data-testid="demo-done">0<`) {
			t.Errorf("demo page lacks the banner or the count:\n%.1500s", r.body)
		}
		if !strings.Contains(r.body, `data-testid="back-to-queue">↑ Leave the demo`) {
			t.Error("the demo desk offers no way out (u)")
		}
		id := strings.TrimPrefix(first, "/review/demo/tasks/")
		before, _ := d.store.FindDemoTask(ctx, id)

		r = visitor.post(first, url.Values{"verdict": {before.AllowedVerdicts[0]}, "rationale": {"practice"}})
		wantStatus(t, r, http.StatusSeeOther)
		if n, _ := d.store.CountDemoVerdicts(ctx, anon.Value); n != 1 {
			t.Errorf("%d demo verdicts stored for the visitor, want 1", n)
		}
		if r = visitor.get(r.header.Get("Location")); !strings.Contains(r.body, `data-testid="demo-done">1<`) {
			t.Error("the next demo task does not show one verdict done")
		}
		after, _ := d.store.FindDemoTask(ctx, id)
		if after.Status != before.Status || len(after.Attempts) != len(before.Attempts) {
			t.Error("a demo verdict changed the demo task")
		}
		wantStatus(t, visitor.post(first, url.Values{"verdict": {"not-a-verdict"}}), http.StatusBadRequest)
		wantStatus(t, visitor.get("/review/demo/tasks/tsk_0123456789abcdef"), http.StatusNotFound)
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestReview_ErrorPagesLeadBackToTheQueue: a refusal on the reviewer site
// (a task that is not there, a view it cannot read) leads back to the
// review queue, not to the dashboard a reviewer cannot open; the
// dashboard's own error pages keep leading to the overview.
func TestReview_ErrorPagesLeadBackToTheQueue(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		_, _, reviewer := d.team()
		back := `<a href="/review" class="btn-primary" data-testid="back-to-queue">Back to the review queue</a>`
		for path, status := range map[string]int{
			"/review/tasks/tsk_0000000000000000": http.StatusNotFound,
			"/review?order=sideways":             http.StatusBadRequest,
		} {
			r := reviewer.get(path)
			if r.status != status || !strings.Contains(r.body, `data-testid="error-page"`) || !strings.Contains(r.body, back) ||
				strings.Contains(r.body, "Back to the overview") {
				t.Errorf("%s = %d, want %d leading back to the queue:\n%.3000s", path, r.status, status, r.body)
			}
		}
		if r := reviewer.get("/keys"); r.status != http.StatusNotFound || strings.Contains(r.body, back) || !strings.Contains(r.body, "Back to the overview") {
			t.Errorf("the dashboard's 404 = %d:\n%.3000s", r.status, r.body)
		}
	})
}
