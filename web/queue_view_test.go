package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// labelledTask stores a task with the labels and deadline for the account
// and hands it to a human.
func labelledTask(t *testing.T, d *dash, email, prompt, taskType, source, touchpoint string, deadline int) {
	t.Helper()
	acct, err := d.store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(time.Second)
	if _, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, TaskType: taskType, Source: source, Touchpoint: touchpoint, DeadlineSeconds: deadline}); err != nil {
		t.Fatal(err)
	}
	claimed, err := d.store.ClaimTasks(ctx, "wrk_test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := d.store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// order returns the prompts of the page's queue, in order.
func order(body string, prompts ...string) []string {
	type at struct {
		i int
		p string
	}
	var found []at
	for _, p := range prompts {
		if i := strings.Index(body, p); i >= 0 {
			found = append(found, at{i, p})
		}
	}
	for i := range found {
		for j := i + 1; j < len(found); j++ {
			if found[j].i < found[i].i {
				found[i], found[j] = found[j], found[i]
			}
		}
	}
	out := []string{}
	for _, f := range found {
		out = append(out, f.p)
	}
	return out
}

func TestReviewQueue_Views(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("team@example.com")
		labelledTask(t, d, "team@example.com", "Refund A", "refund", "shop", "email", 0)
		labelledTask(t, d, "team@example.com", "Refund B", "refund", "app", "chat", 3600)
		labelledTask(t, d, "team@example.com", "Moderate C", "moderation", "shop", "chat", 600)
		all := []string{"Refund A", "Refund B", "Moderate C"}

		for _, c := range []struct {
			query string
			want  []string
		}{
			{"", []string{"Refund A", "Refund B", "Moderate C"}},
			{"?task_type=refund", []string{"Refund A", "Refund B"}},
			{"?source=shop", []string{"Refund A", "Moderate C"}},
			{"?touchpoint=chat&source=shop", []string{"Moderate C"}},
			{"?order=deadline", []string{"Moderate C", "Refund B", "Refund A"}},
			{"?task_type=refund&order=deadline", []string{"Refund B", "Refund A"}},
			{"?task_type=nothing", []string{}},
		} {
			r := b.get("/review" + c.query)
			wantStatus(t, r, http.StatusOK)
			if got := order(r.body, all...); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("/review%s lists %v, want %v", c.query, got, c.want)
			}
			// The list's polling keeps the view; so does the poll's answer.
			if c.query != "" && !strings.Contains(r.body, `hx-get="/review/queue`+strings.ReplaceAll(c.query, "&", "&amp;")) &&
				!strings.Contains(r.body, `hx-get="/review/queue?`) {
				t.Errorf("/review%s: the list polls without its view", c.query)
			}
			poll := b.get("/review/queue" + c.query)
			if got := order(poll.body, all...); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("/review/queue%s lists %v, want %v", c.query, got, c.want)
			}
		}
		// A bad view is a readable 400 page.
		for _, q := range []string{"?order=sideways", "?source=" + url.QueryEscape(strings.Repeat("x", 201)), "?task_type=a%00b"} {
			r := b.get("/review" + q)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="error-message"`) {
				t.Errorf("/review%s = %d\n%.1000s", q, r.status, r.body)
			}
		}
	})
}

// TestReviewDesk_KeepsTheView: a reviewer who opens a task from a view of
// the queue works within it: the desk's previous and next links, the
// decision's and the skip's next task, and "back to the queue" keep the
// view, and when the view is empty the reviewer returns to it, although
// tasks outside it wait.
func TestReviewDesk_KeepsTheView(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("team@example.com")
		labelledTask(t, d, "team@example.com", "Refund A", "refund", "shop", "email", 0)
		labelledTask(t, d, "team@example.com", "Refund B", "refund", "app", "chat", 3600)
		labelledTask(t, d, "team@example.com", "Moderate C", "moderation", "shop", "chat", 600)
		labelledTask(t, d, "team@example.com", "Refund D", "refund", "shop", "chat", 600)
		waiting, _, err := d.store.ListHumanQueue(ctx, mustAccount(t, d, "team@example.com"), arbiter.QueueView{}, 10)
		if err != nil || len(waiting) != 4 {
			t.Fatalf("queue = %d tasks (%v)", len(waiting), err)
		}
		id := map[string]string{}
		for _, task := range waiting {
			id[task.Prompt[len(task.Prompt)-1:]] = task.ID
		}
		const view = "?order=deadline&task_type=refund" // D (600 s), B (3600 s), A (none)
		page := func(letter string) string { return "/review/tasks/" + id[letter] + view }
		html := func(s string) string { return strings.ReplaceAll(s, "&", "&amp;") }

		r := b.get("/review?task_type=refund&order=deadline")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `href="`+html(page("D"))+`"`) {
			t.Fatalf("the queue's first task does not link its page in the view:\n%.3000s", r.body)
		}
		r = b.get(page("D"))
		wantStatus(t, r, http.StatusOK)
		for what, want := range map[string]string{
			"next":          `href="` + html(page("B")) + `"`,
			"back":          `href="` + html("/review"+view) + `"`,
			"verdict form":  `action="` + html("/review/tasks/"+id["D"]+view) + `"`,
			"skip form":     `action="` + html("/review/tasks/"+id["D"]+"/skip"+view) + `"`,
			"its place":     "1 of 3",
			"no other view": "Refund D",
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the desk lacks its %s, %s", what, want)
			}
		}
		if strings.Contains(r.body, `data-nav-prev`) {
			t.Error("the first task of the view has a previous one")
		}

		// Deciding goes on to the view's next task; skipping too; a skipped
		// task comes back after the rest of the view.
		for _, step := range []struct{ path, verdict, to string }{
			{"/review/tasks/" + id["D"] + view, "approve", page("B")},
			{"/review/tasks/" + id["B"] + "/skip" + view, "", page("A")},
			{"/review/tasks/" + id["A"] + view, "reject", page("B")},
			{"/review/tasks/" + id["B"] + view, "approve", "/review" + view},
		} {
			form := url.Values{}
			if step.verdict != "" {
				form.Set("verdict", step.verdict)
			}
			r = b.post(step.path, form)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != step.to {
				t.Fatalf("POST %s = %d to %q, want %q\n%.1000s", step.path, r.status, r.header.Get("Location"), step.to, r.body)
			}
		}
		// The view's empty queue says nothing else waits in the view, not
		// that nothing waits at all.
		if got := b.follow(r).body; !strings.Contains(got, "Nothing else is waiting in this view.") {
			t.Errorf("after the view's last task the queue says:\n%.3000s", got)
		}
		// Moderate C still waits, outside the view.
		if r := b.get("/review"); !strings.Contains(r.body, "Moderate C") {
			t.Error("the task outside the view is gone")
		}
		// A bad view on the desk is a readable 400 page, as on the queue,
		// and opens, decides and skips nothing.
		for _, c := range []struct {
			method, path string
			form         url.Values
		}{
			{"GET", "/review/tasks/" + id["C"] + "?order=sideways", nil},
			{"POST", "/review/tasks/" + id["C"] + "?order=sideways", url.Values{"verdict": {"approve"}}},
			{"POST", "/review/tasks/" + id["C"] + "/skip?task_type=a%00b", url.Values{}},
		} {
			r := b.do(c.method, c.path, c.form, nil)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="error-message"`) {
				t.Errorf("%s %s = %d\n%.1000s", c.method, c.path, r.status, r.body)
			}
		}
		left, _, err := d.store.ListHumanQueue(ctx, mustAccount(t, d, "team@example.com"), arbiter.QueueView{}, 10)
		if err != nil || len(left) != 1 || left[0].ID != id["C"] || left[0].Reservation != nil {
			t.Errorf("after the bad views the queue holds %+v (%v), want Moderate C, held by nobody", left, err)
		}
	})
}
