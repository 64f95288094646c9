package web_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

// fakeModel is a Chat Completions server, as the worker's tests fake it:
// every call answers approve at 0.99 with 1000 input and 100 output
// tokens, once gate is closed; asked gets a value when a call arrives.
type fakeModel struct {
	srv   *httptest.Server
	gate  chan struct{}
	asked chan struct{}
	calls atomic.Int64
}

func newFakeModel(t *testing.T) *fakeModel {
	t.Helper()
	m := &fakeModel{gate: make(chan struct{}), asked: make(chan struct{}, 1)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.calls.Add(1)
		select {
		case m.asked <- struct{}{}:
		default:
		}
		select {
		case <-m.gate:
		case <-r.Context().Done():
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"choices": []any{map[string]any{"message": map[string]any{"role": "assistant",
				"content": `{"verdict": "approve", "confidence": 0.99, "rationale": "checked"}`}}},
			"usage": map[string]any{"prompt_tokens": 1000, "completion_tokens": 100},
		})
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// backtester returns a Backtester whose verifiers file names candidate,
// an OpenAI-compatible verifier at m, priced 1 and 2 per million tokens.
func (m *fakeModel) backtester(t *testing.T, store arbiter.BacktestService) *agent.Backtester {
	t.Helper()
	set, err := agent.ParseVerifiers("verifiers.yaml", []byte(`verifiers:
  - name: live
    backend: none
  - name: candidate
    backend: openai
    base_url: `+m.srv.URL+`
    model: fake-model
    api_key_env: FAKE_KEY
    confidence: self
    price: {input_per_million: 1, output_per_million: 2}
cascade: [live]
`))
	if err != nil {
		t.Fatal(err)
	}
	verifiers, err := agent.Build(set, func(string) string { return "sk-test" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := agent.NewBacktester(ctx, verifiers, store, 30*time.Second, discardLogger())
	t.Cleanup(func() { cancel(); b.Wait() })
	return b
}

// TestCalibration_OwnersBacktestAVerifier: on both stores, an owner starts
// a backtest from the calibration page against a fake model; it runs in
// the background (a second start is refused meanwhile), its report shows
// the candidate beside the current cascade, and no task changed. Admins,
// reviewers, bad fields, another site and another account are refused
// and start nothing.
func TestCalibration_OwnersBacktestAVerifier(t *testing.T) {
	t.Parallel()
	model := map[*dash]*fakeModel{}
	backtesters := map[*dash]*agent.Backtester{}
	eachDash(t, func(d *dash) {
		m := newFakeModel(d.t)
		model[d], backtesters[d] = m, m.backtester(d.t, d.store)
		d.router.Services.Backtests, d.router.Backtester = d.store, backtesters[d]
	}, func(t *testing.T, d *dash) {
		m, b := model[d], backtesters[d]
		owner, admin, reviewer := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		labelledHistory(t, d.store, acct.ID, 20)
		all := arbiter.NewBacktestFilter("candidate")
		all.Limit = arbiter.MaxBacktestTasks
		tasks := func() string {
			t.Helper()
			cases, err := d.store.BacktestCases(ctx, acct.ID, all)
			if err != nil || len(cases) != 20 {
				t.Fatalf("the labelled tasks: %d, %v", len(cases), err)
			}
			var out []*arbiter.Task
			for _, c := range cases {
				task, err := d.store.FindTaskByID(ctx, acct.ID, c.Task.ID)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, task)
			}
			b, _ := json.Marshal(out)
			return string(b)
		}
		before := tasks()
		runs := func() []arbiter.BacktestRun {
			t.Helper()
			list, err := d.store.ListBacktestRuns(ctx, acct.ID, 10)
			if err != nil {
				t.Fatal(err)
			}
			return list
		}

		if r := owner.get("/calibration"); r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="backtest-form"`) ||
			!strings.Contains(r.body, `<option value="candidate">candidate</option>`) {
			t.Fatalf("the owner's calibration page: %d, without the backtest form\n%.3000s", r.status, r.body)
		}
		for name, br := range map[string]*browser{"admin": admin, "reviewer": reviewer} {
			if r := br.get("/calibration"); r.status != http.StatusOK || strings.Contains(r.body, `data-testid="backtests"`) {
				t.Errorf("the %s's calibration page: %d, shows the backtests: %v", name, r.status, strings.Contains(r.body, `data-testid="backtests"`))
			}
			if r := br.post("/calibration/backtests", url.Values{"verifier": {"candidate"}}); r.status != http.StatusNotFound {
				t.Errorf("the %s's start = %d, want 404", name, r.status)
			}
		}

		// Bad fields: a readable 400 naming the field; another site: 403.
		for _, c := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"verifier": {"nobody"}}, "names no verifier"},
			{url.Values{"verifier": {""}}, "verifier"},
			{url.Values{"verifier": {"candidate"}, "since": {"forever"}}, "since must be"},
			{url.Values{"verifier": {"candidate"}, "since": {"400d"}}, "since must be"},
			{url.Values{"verifier": {"candidate"}, "limit": {"0"}}, "limit must be"},
			{url.Values{"verifier": {"candidate"}, "limit": {"many"}}, "limit must be"},
			{url.Values{"verifier": {"candidate"}, "limit": {"5000"}}, "limit must be"},
			{url.Values{"verifier": {"candidate"}, "task_type": {strings.Repeat("x", 300)}}, "task_type"},
		} {
			r := owner.post("/calibration/backtests", c.form)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.want) || !strings.Contains(r.body, "<html") {
				t.Errorf("%v = %d, want a 400 page saying %q\n%.1500s", c.form, r.status, c.want, r.body)
			}
		}
		if r := owner.do("POST", "/calibration/backtests", url.Values{"verifier": {"candidate"}},
			map[string]string{"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
			t.Errorf("a cross-origin start = %d, want 403", r.status)
		}
		if list := runs(); len(list) != 0 || m.calls.Load() != 0 {
			t.Fatalf("refused starts left runs %+v and %d calls", list, m.calls.Load())
		}

		// The run starts at once and holds no request; a second waits.
		r := owner.post("/calibration/backtests", url.Values{"verifier": {"candidate"}, "task_type": {"refund"}, "since": {"7d"}, "limit": {"50"}})
		runURL := r.header.Get("Location")
		if r.status != http.StatusSeeOther || !strings.HasPrefix(runURL, "/calibration/backtests/btr_") {
			t.Fatalf("the start = %d to %q\n%.2000s", r.status, runURL, r.body)
		}
		<-m.asked
		if r := owner.get(runURL); r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="backtest-running"`) ||
			!strings.Contains(r.body, "task type refund, the last 7d, at most 50 tasks") {
			t.Errorf("the running run's page: %d\n%.3000s", r.status, r.body)
		}
		r = owner.post("/calibration/backtests", url.Values{"verifier": {"candidate"}})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "already running") {
			t.Errorf("a second start while one runs = %d\n%.1500s", r.status, r.body)
		}
		if list := runs(); len(list) != 1 || list[0].Status != arbiter.BacktestRunning {
			t.Fatalf("while running, the runs are %+v", list)
		}
		close(m.gate)
		b.Wait()

		id := strings.TrimPrefix(runURL, "/calibration/backtests/")
		run, err := d.store.FindBacktestRun(ctx, acct.ID, id)
		if err != nil || run.Status != arbiter.BacktestDone || len(run.Calls) != 20 {
			t.Fatalf("the finished run: %+v, %v", run, err)
		}
		r = owner.get(runURL)
		for _, want := range []string{`data-testid="backtest-report"`, "candidate on 20 labelled tasks (0 failed, 0 declined)",
			">current cascade<", ">as it ran<", ">0.0240<", html.EscapeString(run.Report.Candidate.Certification.Message),
			html.EscapeString(run.Report.Current.Certification.Message)} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the run's page lacks %q\n%.6000s", want, r.body)
			}
		}
		if r := owner.get("/calibration"); !strings.Contains(r.body, `href="`+runURL+`"`) || !strings.Contains(r.body, ">done<") {
			t.Errorf("the calibration page does not list the finished run")
		}
		if after := tasks(); after != before {
			t.Errorf("the backtest changed tasks:\nbefore %s\nafter  %s", before, after)
		}

		// Another account's owner, and the team's admin, find no run.
		stranger := d.browser()
		stranger.signIn("stranger@example.com")
		if r := stranger.get(runURL); r.status != http.StatusNotFound {
			t.Errorf("another account's run = %d, want 404", r.status)
		}
		if r := admin.get(runURL); r.status != http.StatusNotFound {
			t.Errorf("the admin's view of the run = %d, want 404", r.status)
		}
		if r := owner.get("/calibration/backtests/btr_nothere"); r.status != http.StatusNotFound {
			t.Errorf("an unknown run = %d, want 404", r.status)
		}
	})
}

// TestCalibration_BacktestWithoutAVerifiersFile: a server without a
// verifiers file shows the owner no form, and a post is answered that it
// has none, starting nothing.
func TestCalibration_BacktestWithoutAVerifiersFile(t *testing.T) {
	t.Parallel()
	eachDash(t, func(d *dash) { d.router.Services.Backtests = d.store }, func(t *testing.T, d *dash) {
		owner := d.browser()
		owner.signIn("owner@example.com")
		r := owner.get("/calibration")
		if r.status != http.StatusOK || strings.Contains(r.body, `data-testid="backtest-form"`) || !strings.Contains(r.body, `data-testid="backtest-unavailable"`) {
			t.Errorf("the page without a verifiers file: %d, form shown %v", r.status, strings.Contains(r.body, `data-testid="backtest-form"`))
		}
		r = owner.post("/calibration/backtests", url.Values{"verifier": {"candidate"}})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "no verifiers file (ARBITER_VERIFIERS)") || !strings.Contains(r.body, "<html") {
			t.Errorf("a start without a verifiers file = %d\n%.1500s", r.status, r.body)
		}
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if list, err := d.store.ListBacktestRuns(ctx, acct.ID, 10); err != nil || len(list) != 0 {
			t.Errorf("runs after the refused start: %+v, %v", list, err)
		}
	})
}
