package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// deepContext is a context of the largest size the API accepts, nested
// 9,999 levels deep: deeper than the API accepts, as a task created before
// the limit can be.
func deepContext() string {
	open, close := strings.Repeat("[", 9999), strings.Repeat("]", 9999)
	return open + `"` + strings.Repeat("x", arbiter.MaxContextBytes-len(open)-len(close)-2) + `"` + close
}

func TestReview_DeskForAMaximalContextIsBounded(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		// Written straight to the store, past the API's validation.
		task := humanTask(t, d.store, "alice@example.com", "Decide.", deepContext())
		alice := d.browser()
		alice.signIn("alice@example.com")

		r := alice.get("/review/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		if len(r.body) > 2<<20 {
			t.Errorf("the page is %d bytes, want under 2 MiB (json.Indent made 200 MB)", len(r.body))
		}
		for _, want := range []string{`data-testid="context"`, `>…<`, `data-testid="context-raw"`, `data-testid="verdict-form"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the page lacks %s", want)
			}
		}
	})
}

func TestReview_DeskBeyondTheFirstHundredTasks(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		for i := range 103 {
			humanTask(t, d.store, "alice@example.com", fmt.Sprintf("Refund %d?", i), `{"n":1}`)
		}
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		queue, total, err := d.store.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 200)
		if err != nil || total != 103 || len(queue) != 103 {
			t.Fatalf("queue of %d, total %d (%v)", len(queue), total, err)
		}
		alice := d.browser()
		alice.signIn("alice@example.com")

		// The 102nd task lies past the 100 the desk used to read, and still
		// knows its place and its neighbours.
		r := alice.get("/review/tasks/" + queue[101].ID)
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{"102 of 103", `href="/review/tasks/` + queue[100].ID + `"`, `href="/review/tasks/` + queue[102].ID + `"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the desk lacks %s", want)
			}
		}
		if r := alice.get("/review/count"); strings.TrimSpace(r.body) != "103" {
			t.Errorf("the badge says %q, want 103", r.body)
		}

		// A decision there moves on to the oldest waiting task, by redirect
		// and in place.
		r = alice.post("/review/tasks/"+queue[101].ID, url.Values{"verdict": {"approve"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/review/tasks/"+queue[0].ID {
			t.Errorf("after deciding: %d to %q, want the oldest task", r.status, r.header.Get("Location"))
		}
		r = alice.do("POST", "/review/tasks/"+queue[102].ID, url.Values{"verdict": {"reject"}}, map[string]string{"HX-Request": "true"})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-task-id="`+queue[0].ID+`"`) || !strings.Contains(r.body, "1 of 101") {
			t.Errorf("the next desk in place:\n%.1500s", r.body)
		}
	})
}

// timeElement is how components.Time renders.
var timeElement = regexp.MustCompile(`<time datetime="[^"]+" title="[^"]+ UTC">[^<]+</time>`)

func TestReview_TimesAreRenderedNotPrinted(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "Refund?", "")
		alice := d.browser()
		alice.signIn("alice@example.com")
		for _, path := range []string{"/review", "/review/queue", "/review/tasks/" + task.ID} {
			r := alice.get(path)
			wantStatus(t, r, http.StatusOK)
			if strings.Contains(r.body, "@components") || !timeElement.MatchString(r.body) ||
				path != "/review/tasks/"+task.ID && !strings.Contains(r.body, "created <time") {
				t.Errorf("%s does not render the time:\n%.2000s", path, r.body)
			}
		}
	})
}

// notice returns the text of the page's success alert, or "".
func notice(body string) string {
	m := regexp.MustCompile(`data-testid="alert-success"[^>]*>\s*([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

func TestReview_DecisionWithoutJavaScriptIsConfirmed(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		first := humanTask(t, d.store, "alice@example.com", "First", "")
		humanTask(t, d.store, "alice@example.com", "Second", "")
		alice := d.browser()
		alice.signIn("alice@example.com")

		next := alice.post("/review/tasks/"+first.ID, url.Values{"verdict": {"reject"}}).header.Get("Location")
		r := alice.get(next)
		if got := notice(r.body); got != "Decided &#34;reject&#34;. Here is the next task." {
			t.Errorf("the next task says %q", got)
		}
		// Once: a reload shows no old confirmation.
		if r := alice.get(next); notice(r.body) != "" {
			t.Errorf("the confirmation stays: %q", notice(r.body))
		}

		// The last decision lands on the queue, which says so.
		queue, _, _ := d.store.ListHumanQueue(ctx, mustAccount(t, d, "alice@example.com"), arbiter.QueueView{}, 10)
		r = alice.follow(alice.post("/review/tasks/"+queue[0].ID, url.Values{"verdict": {"approve"}}))
		if got := notice(r.body); got != "Decided &#34;approve&#34;. Nothing else is waiting." || !strings.Contains(r.body, `data-testid="empty-state"`) {
			t.Errorf("the empty queue says %q", got)
		}

		// The demo too.
		visitor := d.browser()
		demo := visitor.get("/review/demo").header.Get("Location")
		task, _ := d.store.FindDemoTask(ctx, strings.TrimPrefix(demo, "/review/demo/tasks/"))
		r = visitor.follow(visitor.post(demo, url.Values{"verdict": {task.AllowedVerdicts[1]}}))
		if got, want := notice(r.body), fmt.Sprintf("Recorded &#34;%s&#34;. Here is the next demo task.", task.AllowedVerdicts[1]); got != want {
			t.Errorf("the next demo task says %q, want %q", got, want)
		}
	})
}

func mustAccount(t *testing.T, d *dash, email string) string {
	t.Helper()
	acct, err := d.store.FindAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	return acct.ID
}

func TestReview_DemoEndsOnAPageOfItsOwn(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		tasks, _ := d.store.ListDemoTasks(ctx)
		last := tasks[len(tasks)-1]
		visitor := d.browser()
		visitor.get("/review/demo")

		// With htmx, the whole page moves on: no desk swapped into the desk.
		r := visitor.do("POST", "/review/demo/tasks/"+last.ID, url.Values{"verdict": {last.AllowedVerdicts[0]}},
			map[string]string{"HX-Request": "true"})
		if r.status != http.StatusNoContent || r.header.Get("HX-Redirect") != "/review/demo/done" || r.body != "" {
			t.Errorf("the last htmx verdict = %d, HX-Redirect %q, body %.300q", r.status, r.header.Get("HX-Redirect"), r.body)
		}
		r = visitor.get("/review/demo/done")
		wantStatus(t, r, http.StatusOK)
		if n := strings.Count(r.body, "<main"); n != 1 {
			t.Errorf("the end of the demo has %d <main>, want 1", n)
		}
		if !strings.Contains(r.body, "You have given 1 verdict on 10 sample tasks.") || notice(r.body) == "" {
			t.Errorf("the end of the demo:\n%.3000s", r.body)
		}

		// Without JavaScript, a redirect there.
		r = visitor.post("/review/demo/tasks/"+last.ID, url.Values{"verdict": {last.AllowedVerdicts[0]}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/review/demo/done" {
			t.Errorf("the last verdict = %d to %q", r.status, r.header.Get("Location"))
		}
		if r = visitor.get("/review/demo/done"); !strings.Contains(r.body, "You have given 2 verdicts on 10 sample tasks.") {
			t.Errorf("the end of the demo does not count 2 verdicts")
		}
	})
}

func TestReview_DemoCountsVerdictsInWords(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		visitor := d.browser()
		first := visitor.get("/review/demo").header.Get("Location")
		task, _ := d.store.FindDemoTask(ctx, strings.TrimPrefix(first, "/review/demo/tasks/"))
		for n, want := range []string{"</span> verdicts.", "</span> verdict.", "</span> verdicts."} {
			r := visitor.get(first)
			if !strings.Contains(r.body, fmt.Sprintf(`data-testid="demo-done">%d%s`, n, want)) {
				t.Errorf("after %d verdicts the banner does not say %q", n, want)
			}
			visitor.post(first, url.Values{"verdict": {task.AllowedVerdicts[0]}})
		}
	})
}

func TestReview_DemoShowsWhatTheVerifierSaid(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		tasks, _ := d.store.ListDemoTasks(ctx)
		visitor := d.browser()
		visitor.get("/review/demo")
		for _, listed := range tasks {
			task, _ := d.store.FindDemoTask(ctx, listed.ID)
			r := visitor.get("/review/demo/tasks/" + task.ID)
			wantStatus(t, r, http.StatusOK)
			a := task.Attempts[0]
			for _, want := range []string{`data-testid="attempts"`, "What the verifier said", "demo-verifier",
				*a.Verdict + " (" + fmt.Sprintf("%d%%", int(*a.Confidence*100+0.5)) + ")"} {
				if !strings.Contains(r.body, want) {
					t.Errorf("%s lacks %q", task.ID, want)
				}
			}
		}
	})
}
