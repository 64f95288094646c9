package web_test

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
)

// The agent's answer on the audited task: every part of it is a string
// found nowhere else on the desk, so the page can be searched for it.
const (
	agentVerdict   = "grant_refund"
	agentRationale = "The parcel tracking shows a late delivery (agent rationale)."
	agentModel     = "model-xyz-7"
)

// auditedTask creates a task of email's account with its own audit rate of
// 1 and completes it as the agent would, at confidence 0.93: it waits in the
// review queue as a blind audit.
func auditedTask(t *testing.T, store *db.DB, email string) *arbiter.Task {
	t.Helper()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	one := 1.0
	task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund order ord_77 for a late parcel?",
		AllowedVerdicts: []string{agentVerdict, "deny_refund"}, ConfidenceThreshold: 0.8, TaskType: "refund",
		Touchpoint: "email", Source: "support-bot", AuditRate: &one})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_audit", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		verdict, confidence, model := agentVerdict, 0.93, agentModel
		if err := store.FinishAgentAttempt(ctx, "wrk_audit", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence,
				Model: &model, Rationale: agentRationale},
			Next: arbiter.StatusCompleted,
		}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.FindTaskByID(ctx, acct.ID, task.ID)
	if err != nil || !got.AuditWaiting() {
		t.Fatalf("the task is not waiting for its audit: %+v, %v", got, err)
	}
	return got
}

// verdictFormRE matches the desk's verdict form, whose buttons name every
// allowed verdict, the agent's among them.
var verdictFormRE = regexp.MustCompile(`(?s)<form[^>]*data-testid="verdict-form".*?</form>`)

// wantBlind fails the test when the desk's HTML shows anything of the
// agent's answer: its verdict (outside the verdict buttons), confidence,
// rationale or model.
func wantBlind(t *testing.T, page string) {
	t.Helper()
	if !strings.Contains(page, `data-testid="audit-banner"`) || !verdictFormRE.MatchString(page) {
		t.Fatalf("not an audit desk with a verdict form:\n%.3000s", page)
	}
	form := verdictFormRE.FindString(page)
	if strings.Count(form, agentVerdict) != 2 { // the button's value and its label
		t.Errorf("the verdict form names %s %d times, want 2 (value and label)", agentVerdict, strings.Count(form, agentVerdict))
	}
	rest := verdictFormRE.ReplaceAllString(page, "")
	for _, leak := range []string{agentVerdict, "93%", "0.93", agentRationale, "agent rationale", agentModel,
		`data-testid="attempts"`, "What the verifier said", "was already decided by", `data-testid="decided"`} {
		if strings.Contains(rest, leak) {
			i := strings.Index(rest, leak)
			t.Errorf("the audit desk shows %q: …%s…", leak, rest[max(0, i-200):min(len(rest), i+200)])
		}
	}
}

func TestReview_AuditIsBlindAndLeavesTheTask(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := auditedTask(t, d.store, "alice@example.com")
		first := humanTask(t, d.store, "alice@example.com", "Refund order ord_1 first?", `{"n":1}`)
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")

		// The queue lists it, marked.
		r := alice.get("/review")
		wantStatus(t, r, http.StatusOK)
		if strings.Count(r.body, `data-testid="queue-item"`) != 2 || strings.Count(r.body, `data-testid="audit-badge"`) != 1 {
			t.Errorf("the queue does not list the audit, marked:\n%.3000s", r.body)
		}

		// Its page, whole, and in place after a decision on the other
		// task (htmx), shows nothing of the agent's answer.
		r = alice.get("/review/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		wantBlind(t, r.body)
		r = alice.do("POST", "/review/tasks/"+first.ID, url.Values{"verdict": {"approve"}}, map[string]string{"HX-Request": "true"})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-task-id="`+task.ID+`"`) {
			t.Fatalf("the next desk is not the audit, the one task left:\n%.2000s", r.body)
		}
		wantBlind(t, r.body)

		// The answer disagrees; the task keeps the agent's verdict.
		r = alice.post("/review/tasks/"+task.ID, url.Values{"verdict": {"deny_refund"}, "rationale": {"Policy says no."}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("answering the audit: %d\n%.2000s", r.status, r.body)
		}
		after, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID)
		if after.Status != arbiter.StatusCompleted || *after.FinalVerdict != agentVerdict || *after.FinalTier != arbiter.TierAgent ||
			*after.FinalConfidence != 0.93 || *after.CompletedAt != *task.CompletedAt {
			t.Errorf("the audit changed the task: %+v", after)
		}
		last := after.Attempts[len(after.Attempts)-1]
		if !last.Audit || last.Tier != arbiter.TierHuman || *last.Verdict != "deny_refund" {
			t.Errorf("the last attempt is %+v, want the audit's", last)
		}
		// Answered, it is no longer blind, nor in the queue.
		if r := alice.get("/review/count"); strings.TrimSpace(r.body) != "" {
			t.Errorf("the badge says %q, want nothing", r.body)
		}

		// The report flags the disagreement, linking the task.
		r = alice.get("/calibration")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="disagreements"`) || !strings.Contains(r.body, `href="/tasks/`+task.ID+`"`) {
			t.Errorf("the report does not flag the audit:\n%.4000s", r.body)
		}
	})
}

// svgRE finds the charts of a page.
var svgRE = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// wantWellFormed fails the test unless each chart of the page is
// well-formed XML, and returns how many there are.
func wantWellFormed(t *testing.T, page string) int {
	t.Helper()
	charts := svgRE.FindAllString(page, -1)
	for _, chart := range charts {
		dec := xml.NewDecoder(strings.NewReader(chart))
		dec.Strict = true
		depth, root := 0, ""
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("a chart is not well-formed XML: %v\n%s", err, chart)
			}
			switch el := tok.(type) {
			case xml.StartElement:
				if depth == 0 {
					root = el.Name.Local
				}
				depth++
			case xml.EndElement:
				depth--
			}
		}
		if depth != 0 || root != "svg" {
			t.Errorf("a chart ends at depth %d with root %q", depth, root)
		}
	}
	return len(charts)
}

// labelledHistory makes n labelled pairs for the account through the real
// flow: tasks with an audit rate of 1, answered by the agent at confidences
// from 0.5 to 0.99 (routed below 0.8, audited above), then decided by a
// person, who disagrees with one in forty. The agent's answers carry the
// versions in turn, when there are any.
func labelledHistory(t *testing.T, store *db.DB, accountID string, n int, versions ...string) {
	t.Helper()
	one := 1.0
	confidence := map[string]float64{}
	human := map[string]string{}
	version := map[string]string{}
	for i := 0; i < n; i += arbiter.MaxBatchTasks {
		var creates []arbiter.TaskCreate
		for j := i; j < min(n, i+arbiter.MaxBatchTasks); j++ {
			creates = append(creates, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "chat", AuditRate: &one})
		}
		created, err := store.CreateTasks(ctx, accountID, creates)
		if err != nil {
			t.Fatal(err)
		}
		for k, c := range created {
			confidence[c.Task.ID] = 0.5 + float64((i+k)%50)/100
			human[c.Task.ID] = "approve"
			if len(versions) > 0 {
				version[c.Task.ID] = versions[(i+k)%len(versions)]
			}
			if (i+k)%40 == 0 {
				human[c.Task.ID] = "reject"
			}
		}
	}
	for {
		claimed, err := store.ClaimTasks(ctx, "wrk_history", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) == 0 {
			break
		}
		for _, c := range claimed {
			verdict, conf, model := "approve", confidence[c.ID], "m1"
			step := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &conf, Model: &model},
				Next: arbiter.StatusCompleted}
			if conf < 0.8 {
				step.Next = arbiter.StatusHumanNeeded
			}
			if v, ok := version[c.ID]; ok {
				step.Attempt.Version = &v
			}
			if err := store.FinishAgentAttempt(ctx, "wrk_history", c.ID, step); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, verdict := range human {
		if _, err := store.DecideTask(ctx, accountID, id, arbiter.HumanDecision{Verdict: verdict, Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCalibration_PageAndAPIShowTheSameReport(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
		other, _ := d.store.FindOrCreateAccountByEmail(ctx, "bob@example.com")
		labelledHistory(t, d.store, acct.ID, 400)
		_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "k", arbiter.Actor{Email: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		_, otherKey, _ := d.store.CreateAPIKey(ctx, other.ID, "k", arbiter.Actor{Email: "bob@example.com"})

		getAPI := func(key, query string) (int, map[string]any) {
			t.Helper()
			return getCalibration(t, d, key, query)
		}
		status, report := getAPI(key, "task_type=refund&target_error_rate=0.05")
		if status != http.StatusOK || report["n"] != 400.0 {
			t.Fatalf("GET /v1/calibration = %d %v", status, report)
		}
		rec := report["recommendation"].(map[string]any)

		alice := d.browser()
		alice.signIn("alice@example.com")
		r := alice.get("/calibration?task_type=refund&target_error_rate=5%25")
		wantStatus(t, r, http.StatusOK)
		if n := wantWellFormed(t, r.body); n != 2 {
			t.Errorf("the page has %d charts, want the reliability diagram and the risk–coverage curve", n)
		}
		for _, want := range []string{`data-testid="reliability"`, `data-testid="risk-coverage"`, `>400<`, rec["message"].(string)} {
			if !strings.Contains(r.body, strings.ReplaceAll(want, "'", "&#39;")) {
				t.Errorf("the page lacks %q", want)
			}
		}
		if th, ok := rec["threshold"].(float64); !ok || !strings.Contains(r.body, `data-testid="recommended-threshold">`+strconv.FormatFloat(th, 'f', 2, 64)+`<`) {
			t.Errorf("the page does not recommend the API's threshold %v", rec["threshold"])
		}

		// Another account sees none of it; bad queries are 400 in both.
		if status, report := getAPI(otherKey, ""); status != http.StatusOK || report["n"] != 0.0 {
			t.Errorf("another account's report: %d %v", status, report)
		}
		for _, q := range []string{"target_error_rate=2", "bogus=1", "created_after=yesterday", "verifier=Not%20a%20name"} {
			if status, body := getAPI(key, q); status != http.StatusBadRequest || body["error"] == "" {
				t.Errorf("GET /v1/calibration?%s = %d %v, want 400", q, status, body)
			}
			if r := alice.get("/calibration?" + q); r.status != http.StatusBadRequest {
				t.Errorf("/calibration?%s = %d, want 400", q, r.status)
			}
		}
		// An empty form field is left out, as the form sends it.
		if r := alice.get("/calibration?task_type=&source=&model=&created_after=&target_error_rate=2%25"); r.status != http.StatusOK {
			t.Errorf("the empty form: %d", r.status)
		}
	})
}

func TestSettings_AuditRate(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		r := alice.get("/settings/audit")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `value="0"`) {
			t.Errorf("the form does not show 0:\n%.2000s", r.body)
		}
		r = alice.post("/settings/audit", url.Values{"audit_rate": {"5"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/audit?saved=1" {
			t.Fatalf("saving: %d %q", r.status, r.header.Get("Location"))
		}
		if rate, _ := d.store.AuditRate(ctx, acct.ID); rate != 0.05 {
			t.Errorf("the rate is %v, want 0.05", rate)
		}
		r = alice.follow(r)
		if !strings.Contains(r.body, "Saved: 5%") || !strings.Contains(r.body, `value="5"`) {
			t.Errorf("after saving:\n%.2000s", r.body)
		}
		for _, bad := range []string{"abc", "150", "-1", "", "1e2"} {
			r := alice.post("/settings/audit", url.Values{"audit_rate": {bad}})
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="settings-error"`) {
				t.Errorf("audit_rate %q: %d", bad, r.status)
			}
		}
		if rate, _ := d.store.AuditRate(ctx, acct.ID); rate != 0.05 {
			t.Errorf("a refused rate changed it to %v", rate)
		}
		// Signed out, the page and the form lead to sign-in.
		if r := d.browser().post("/settings/audit", url.Values{"audit_rate": {"50"}}); r.status == http.StatusSeeOther && r.header.Get("Location") == "/settings/audit?saved=1" {
			t.Error("a visitor changed the rate")
		}
		if rate, _ := d.store.AuditRate(ctx, acct.ID); rate != 0.05 {
			t.Errorf("a visitor changed it to %v", rate)
		}
	})
}

func TestReview_DemoLinksToItsCalibrationReport(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		visitor := d.browser()
		r := visitor.follow(visitor.get("/review/demo"))
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `href="/review/demo/calibration"`) {
			t.Errorf("the demo desk does not link to the report")
		}
		r = visitor.get("/review/demo/calibration")
		wantStatus(t, r, http.StatusOK)
		if wantWellFormed(t, r.body) != 2 || !strings.Contains(r.body, `data-testid="recommended-threshold"`) {
			t.Errorf("the demo report has no charts or no recommendation:\n%.3000s", r.body)
		}
		if strings.Contains(r.body, `href="/tasks/`) {
			t.Error("the demo report links to dashboard task pages")
		}
	})
}

func TestAPI_TaskCreateTakesAnAuditRate(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("owner@example.com")
		status, _, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a","b"],"audit_rate":0.5}`)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, b)
		}
		var task struct{ ID string }
		_ = json.Unmarshal(b, &task)
		acct, _ := a.store.FindAccountByEmail(ctx, "owner@example.com")
		stored, _ := a.store.FindTaskByID(ctx, acct.ID, task.ID)
		if stored.AuditRate == nil || *stored.AuditRate != 0.5 {
			t.Errorf("stored audit rate %v", stored.AuditRate)
		}
		for _, body := range []string{
			`{"prompt":"p","allowed_verdicts":["a"],"audit_rate":1.5}`,
			`{"prompt":"p","allowed_verdicts":["a"],"audit_rate":"half"}`,
		} {
			if status, _, b := a.do("POST", "/v1/tasks", key, body); status != http.StatusBadRequest || !strings.Contains(string(b), "audit_rate") {
				t.Errorf("%s: %d %s", body, status, b)
			}
		}
		status, _, b = a.do("POST", "/v1/tasks/batch", key, `{"tasks":[{"prompt":"p","allowed_verdicts":["a"],"audit_rate":0.25},{"prompt":"q","allowed_verdicts":["a"],"audit_rate":7}]}`)
		if status != http.StatusOK || !strings.Contains(string(b), "audit_rate") {
			t.Errorf("batch: %d %s", status, b)
		}
	})
}

func TestCalibration_PageAndAPIShowTheCertificate(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
		labelledHistory(t, d.store, acct.ID, 400)
		_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "k", arbiter.Actor{Email: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		get := func(query string) (int, map[string]any) {
			t.Helper()
			return getCalibration(t, d, key, query)
		}
		status, report := get("target_error_rate=0.1&confidence=0.9")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/calibration = %d %v", status, report)
		}
		cert := report["certification"].(map[string]any)
		th, ok := cert["threshold"].(float64)
		if !ok || cert["confidence"] != 0.9 || cert["target_error_rate"] != 0.1 || cert["n"].(float64) < 1 {
			t.Fatalf("the 400 pairs certify nothing at 10%% and 90%%: %v", cert)
		}
		if upper := cert["error_upper"].(float64); upper > 0.1 {
			t.Errorf("certified with an upper bound of %v, above the target", upper)
		}
		if strata := report["strata"].([]any); len(strata) != 3 || strata[0].(map[string]any)["n"] != 400.0 {
			t.Errorf("strata: %v, want the one model, the one task type and no version, each with the 400 pairs", strata)
		}
		if ap := report["agent_person"].(map[string]any); ap["n"] != 400.0 || ap["ac1"] == nil {
			t.Errorf("agent_person: %v", ap)
		}

		alice := d.browser()
		alice.signIn("alice@example.com")
		r := alice.get("/calibration?target_error_rate=10%25&confidence=90%25")
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{`data-testid="certified-threshold">` + strconv.FormatFloat(th, 'f', 2, 64) + `<`,
			cert["message"].(string), `data-testid="agreement-stats"`, `value="90%"`, `data-stratum="task_type:refund"`, `data-stratum="model:m1"`} {
			if !strings.Contains(r.body, strings.ReplaceAll(want, "'", "&#39;")) {
				t.Errorf("the page lacks %q", want)
			}
		}
		for _, q := range []string{"confidence=0.3", "confidence=1", "confidence=x"} {
			if status, body := get(q); status != http.StatusBadRequest || body["field"] != "confidence" {
				t.Errorf("GET /v1/calibration?%s = %d %v, want 400 naming confidence", q, status, body)
			}
			if r := alice.get("/calibration?" + q); r.status != http.StatusBadRequest {
				t.Errorf("/calibration?%s = %d, want 400", q, r.status)
			}
		}
	})
}

// TestCalibration_DriftShowsOnTheOverviewAndTheReport drifts an account's
// audited error rate through the real flow (30 blind audits, all wrong):
// the overview and the report show the banner, the API's report carries
// the drift, and another account sees none of it.
func TestCalibration_DriftShowsOnTheOverviewAndTheReport(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
		d.store.FindOrCreateAccountByEmail(ctx, "bob@example.com")
		_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "k", arbiter.Actor{Email: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		alice := d.browser()
		alice.signIn("alice@example.com")
		if r := alice.get("/"); strings.Contains(r.body, `data-testid="drift-banner"`) {
			t.Fatal("a banner before any audit")
		}

		one := 1.0
		var creates []arbiter.TaskCreate
		for range 30 {
			creates = append(creates, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, AuditRate: &one})
		}
		created, err := d.store.CreateTasks(ctx, acct.ID, creates)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.store.ClaimTasks(ctx, "wrk_drift", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claimed {
			verdict, conf := "approve", 0.93
			if err := d.store.FinishAgentAttempt(ctx, "wrk_drift", c.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
				Verdict: &verdict, Confidence: &conf}, Next: arbiter.StatusCompleted}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range created {
			if _, err := d.store.DecideTask(ctx, acct.ID, c.Task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
		}

		for _, path := range []string{"/", "/calibration"} {
			r := alice.get(path)
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, `data-testid="drift-banner"`) || !strings.Contains(r.body, "blind audits were wrong then") {
				t.Errorf("%s shows no drift banner", path)
			}
			// The banner's figures are its window's: it says when it was taken.
			if drifts, err := d.store.CalibrationDrifts(ctx, acct.ID); err != nil || len(drifts) == 0 ||
				!strings.Contains(r.body, "On "+drifts[0].DriftedAt.Time().UTC().Format("2006-01-02 15:04 UTC")) {
				t.Errorf("%s's banner does not say when it drifted (%v):\n%.3000s", path, err, r.body)
			}
		}
		_, report := getCalibration(t, d, key, "")
		drift, _ := report["drift"].(map[string]any)
		if drift == nil || drift["errors"] == 0.0 || drift["error_lower"].(float64) <= arbiter.DefaultTargetErrorRate {
			t.Errorf("the API's report's drift: %v", report["drift"])
		}
		bob := d.browser()
		bob.signIn("bob@example.com")
		if r := bob.get("/"); strings.Contains(r.body, `data-testid="drift-banner"`) {
			t.Error("another account shows the banner")
		}
	})
}

// getCalibration reads GET /v1/calibration?query with the key, checks the
// answer against the OpenAPI document and returns its status and JSON.
func getCalibration(t *testing.T, d *dash, key, query string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url+"/v1/calibration?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return res.StatusCode, out
}

// TestCalibration_RestrictedToOneVersion: the report of a history answered
// by two verifier versions splits by version, and the API and the page
// restrict it to one; a version nobody recorded is an empty report, and a
// version that is not a label is refused.
func TestCalibration_RestrictedToOneVersion(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
		labelledHistory(t, d.store, acct.ID, 200, "prompt-1", "prompt-2")
		_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "k", arbiter.Actor{Email: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		versions := func(report map[string]any) map[string]float64 {
			out := map[string]float64{}
			for _, s := range report["strata"].([]any) {
				if s := s.(map[string]any); s["dimension"] == "version" {
					out[s["value"].(string)] = s["n"].(float64)
				}
			}
			return out
		}
		status, all := getCalibration(t, d, key, "")
		if got := versions(all); status != http.StatusOK || all["n"] != 200.0 || len(got) != 2 || got["prompt-1"] != 100 || got["prompt-2"] != 100 {
			t.Fatalf("GET /v1/calibration = %d, n %v, version strata %v; want 100 pairs of each version", status, all["n"], got)
		}
		status, one := getCalibration(t, d, key, "version=prompt-2")
		if got := versions(one); status != http.StatusOK || one["n"] != 100.0 || len(got) != 1 || got["prompt-2"] != 100 {
			t.Errorf("?version=prompt-2 = %d, n %v, version strata %v; want prompt-2's 100 pairs", status, one["n"], got)
		}
		status, none := getCalibration(t, d, key, "version=prompt-9")
		if status != http.StatusOK || none["n"] != 0.0 || len(none["strata"].([]any)) != 0 {
			t.Errorf("?version=prompt-9 = %d, n %v, strata %v; want an empty report", status, none["n"], none["strata"])
		}
		if status, body := getCalibration(t, d, key, "version="+strings.Repeat("v", 201)); status != http.StatusBadRequest || body["field"] != "version" {
			t.Errorf("a version of 201 characters = %d %v, want 400 naming version", status, body)
		}

		// The task's JSON shows each attempt's version: the agent's label,
		// and null for the person.
		disagreed := all["disagreements"].([]any)
		if len(disagreed) == 0 {
			t.Fatal("the history has no audit disagreement to look at")
		}
		id := disagreed[0].(map[string]any)["task_id"].(string)
		req, _ := http.NewRequest("GET", d.url+"/v1/tasks/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
		var task struct {
			Attempts []struct {
				Tier    string  `json:"tier"`
				Version *string `json:"version"`
			} `json:"attempts"`
		}
		if err := json.Unmarshal(b, &task); err != nil || len(task.Attempts) != 2 || task.Attempts[0].Version == nil ||
			!strings.HasPrefix(*task.Attempts[0].Version, "prompt-") || task.Attempts[1].Version != nil || !strings.Contains(string(b), `"version":null`) {
			t.Errorf("GET /v1/tasks/%s: %s (%v); want the agent's version and null for the person", id, b, err)
		}

		alice := d.browser()
		alice.signIn("alice@example.com")
		r := alice.get("/calibration")
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{`<option value="" selected>All versions</option>`, `<option value="prompt-1">prompt-1</option>`,
			`<option value="prompt-2">prompt-2</option>`, `data-stratum="version:prompt-1"`, `data-stratum="version:prompt-2"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the report lacks %q", want)
			}
		}
		r = alice.get("/calibration?version=prompt-2")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `<option value="prompt-2" selected>prompt-2</option>`) || strings.Contains(r.body, `data-stratum="version:prompt-1"`) ||
			!strings.Contains(r.body, `data-testid="pairs">100<`) {
			t.Errorf("the report restricted to prompt-2 does not show it alone:\n%.4000s", r.body)
		}
		r = alice.get("/calibration?version=prompt-9")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `<option value="prompt-9" selected>prompt-9</option>`) || !strings.Contains(r.body, `data-testid="pairs">0<`) {
			t.Errorf("the report of an unknown version is not an empty report")
		}
	})
}

// TestCalibration_ApplyTheCertifiedThreshold: owners and admins are
// offered to make a certified threshold their policy's, and one post does
// it, audited, leaving the policy's other values; reviewers are not
// offered it and their post changes nothing; a stale post (the
// certificate is not what the page showed) and another site's post are
// refused.
func TestCalibration_ApplyTheCertifiedThreshold(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		labelledHistory(t, d.store, acct.ID, 400)
		_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "k", arbiter.Actor{Email: "owner@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		const query = "task_type=refund&target_error_rate=0.1&confidence=0.9"
		_, report := getCalibration(t, d, key, query)
		th, ok := report["certification"].(map[string]any)["threshold"].(float64)
		if !ok || th == 0.9 {
			t.Fatalf("the history certifies %v, want a threshold other than the policy's 0.90", report["certification"])
		}
		certified, exact := arbiter.FormatThreshold(th), strconv.FormatFloat(th, 'f', -1, 64)
		floor, _ := report["certification"].(map[string]any)["floor"].(float64)
		if r := owner.post("/settings/policy", url.Values{"task_type": {"refund"}, "confidence_threshold": {"0.9"},
			"deadline": {"1h"}, "on_expiry": {"expire"}}); r.status != http.StatusSeeOther {
			t.Fatalf("saving the policy: %d\n%.1000s", r.status, r.body)
		}
		policy := func() *arbiter.Policy {
			t.Helper()
			p, err := d.store.FindPolicy(ctx, acct.ID, "refund")
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		apply := func(b *browser, threshold string, header map[string]string) response {
			t.Helper()
			return b.do("POST", "/calibration/apply", url.Values{"query": {query}, "threshold": {threshold}}, header)
		}

		button := `data-testid="apply-threshold-button">Apply ` + certified + ` to policy refund</button>`
		for name, b := range map[string]*browser{"owner": owner, "admin": admin} {
			r := b.get("/calibration?" + query)
			if !strings.Contains(r.body, button) || !strings.Contains(r.body, `name="threshold" value="`+exact+`"`) {
				t.Errorf("the %s is not offered to apply %s:\n%.6000s", name, certified, r.body)
			}
			if ends := "The evidence ends at " + arbiter.FormatThreshold(floor); !strings.Contains(r.body, ends) {
				t.Errorf("the %s's page does not say where the evidence ends (%q)", name, ends)
			}
		}
		if r := owner.get("/calibration?target_error_rate=0.1&confidence=0.9"); !strings.Contains(r.body, "to the default policy</button>") {
			t.Errorf("the report of every type does not offer the default policy")
		}
		if r := reviewer.get("/calibration?" + query); r.status != http.StatusOK || strings.Contains(r.body, `data-testid="apply-threshold"`) {
			t.Errorf("a reviewer's report: %d, offers to apply: %v", r.status, strings.Contains(r.body, `data-testid="apply-threshold"`))
		}

		// Refused: a reviewer, another site, a stale threshold, a report
		// that certifies nothing, a report of one source.
		if r := apply(reviewer, certified, nil); r.status != http.StatusNotFound {
			t.Errorf("a reviewer's post = %d, want 404", r.status)
		}
		if r := apply(owner, certified, map[string]string{"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
			t.Errorf("a cross-origin post = %d, want 403", r.status)
		}
		r := apply(owner, "0.55", nil)
		if r.status != http.StatusConflict || !strings.Contains(r.body, "changed since the page was shown: it is "+certified+" now, not 0.55") {
			t.Errorf("a stale post = %d\n%.3000s", r.status, r.body)
		}
		r = apply(owner, "0.3", nil)
		if below := "0.30 is below where the evidence ends (" + arbiter.FormatThreshold(floor) + ")"; r.status != http.StatusConflict || !strings.Contains(r.body, below) {
			t.Errorf("a post below the evidence = %d, want 409 saying %q\n%.3000s", r.status, below, r.body)
		}
		r = owner.do("POST", "/calibration/apply", url.Values{"query": {"task_type=refund&target_error_rate=0.001"}, "threshold": {certified}}, nil)
		if r.status != http.StatusConflict || !strings.Contains(r.body, "no longer certifies a threshold") {
			t.Errorf("a post for a report that certifies nothing = %d\n%.3000s", r.status, r.body)
		}
		for _, form := range []url.Values{{"query": {"source=bot&target_error_rate=0.1"}, "threshold": {certified}},
			{"query": {query}, "threshold": {"high"}}, {"query": {"nope=1"}, "threshold": {certified}}} {
			if r := owner.do("POST", "/calibration/apply", form, nil); r.status != http.StatusBadRequest {
				t.Errorf("%v = %d, want 400", form, r.status)
			}
		}
		if p := policy(); *p.ConfidenceThreshold != 0.9 {
			t.Fatalf("a refused post changed the policy: %+v", p)
		}

		r = apply(admin, exact, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/policy?saved=1&task_type=refund" {
			t.Fatalf("the admin's post = %d to %q\n%.2000s", r.status, r.header.Get("Location"), r.body)
		}
		if p := policy(); *p.ConfidenceThreshold != th || p.DeadlineSeconds == nil || *p.DeadlineSeconds != 3600 ||
			p.Target == nil || *p.Target != (arbiter.ErrorTarget{ErrorRate: 0.1, Confidence: 0.9}) {
			t.Errorf("after applying: %+v, want threshold %v, the report's target, and the deadline kept", p, th)
		}
		events, _ := d.store.ListAuditEvents(ctx, acct.ID, 1)
		if len(events) != 1 || events[0].Kind != arbiter.AuditPolicyChanged || events[0].Actor != "admin@example.com" ||
			!strings.Contains(events[0].Detail, "threshold "+strconv.FormatFloat(th, 'f', -1, 64)) || !strings.Contains(events[0].Detail, "calibration report") {
			t.Errorf("the audit log's latest event: %+v", events)
		}
		if r := owner.get("/calibration?" + query); strings.Contains(r.body, `data-testid="apply-threshold"`) {
			t.Errorf("the policy has the certified threshold, yet the page offers it again")
		}
	})
}

// TestCalibration_PageAndAPIShowTheCascade: tasks decided by small
// (twenty, all audited, six wrong: drifted above 2%), by large (unaudited)
// and by people; the API's cascade composes them as the page shows them,
// with small's drift alarm, and another account sees none of it.
func TestCalibration_PageAndAPIShowTheCascade(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "carol@example.com")
		if err := d.store.SetAuditRate(ctx, acct.ID, 1); err != nil {
			t.Fatal(err)
		}
		_, key, err := d.store.CreateAPIKey(ctx, acct.ID, "k", arbiter.Actor{Email: "carol@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		finish := func(verifier string, confidence float64, person string) {
			task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.9, TaskType: "refund"})
			if err != nil {
				t.Fatal(err)
			}
			if claimed, err := d.store.ClaimTasks(ctx, "w", 1, time.Minute); err != nil || len(claimed) != 1 {
				t.Fatalf("claim: %v %v", claimed, err)
			}
			verdict, cost := "approve", 0.002
			step := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verifier: &verifier, Verdict: &verdict,
				Confidence: &confidence, Cost: &cost}, Next: arbiter.StatusCompleted}
			if confidence < 0.9 {
				step.Next = arbiter.StatusHumanNeeded
			}
			if err := d.store.FinishAgentAttempt(ctx, "w", task.ID, step); err != nil {
				t.Fatal(err)
			}
			if person != "" {
				if _, err := d.store.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: person, Reviewer: "rev@example.com"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range 20 {
			finish("small", 0.95, map[bool]string{true: "reject", false: "approve"}[i < 6])
		}
		finish("large", 0.99, "") // decided, never audited: its audit still waits
		for range 5 {
			finish("large", 0.5, "approve")
		}

		status, report := getCalibration(t, d, key, "task_type=refund")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/calibration = %d %v", status, report)
		}
		cascade := report["cascade"].(map[string]any)
		deciders := cascade["deciders"].([]any)
		if cascade["tasks"] != 26.0 || len(deciders) != 3 {
			t.Fatalf("cascade %v", cascade)
		}
		small, large, people := deciders[0].(map[string]any), deciders[1].(map[string]any), deciders[2].(map[string]any)
		if small["decider"] != "small" || small["tasks"] != 20.0 || small["audits"] != 20.0 || small["audit_errors"] != 6.0 ||
			small["drift"].(map[string]any)["drifted"] != true || small["calls"] != 20.0 {
			t.Errorf("small %v", small)
		}
		if large["decider"] != "large" || large["tasks"] != 1.0 || large["calls"] != 6.0 || large["error_upper"] != nil || large["drift"] != nil {
			t.Errorf("large %v", large)
		}
		if people["decider"] != arbiter.DeciderPeople || people["tasks"] != 5.0 || people["cost_per_decided"] != nil {
			t.Errorf("people %v", people)
		}
		if u := cascade["unaudited"].([]any); len(u) != 1 || u[0] != "large" || cascade["error_bound"] == nil {
			t.Errorf("unaudited %v, bound %v", u, cascade["error_bound"])
		}

		carol := d.browser()
		carol.signIn("carol@example.com")
		r := carol.get("/calibration?task_type=refund")
		wantStatus(t, r, http.StatusOK)
		wantWellFormed(t, r.body)
		for _, want := range []string{`data-testid="cascade-table"`, `data-decider="small"`, `data-decider="large"`, `data-decider="people"`,
			`data-testid="verifier-drift" data-verifier="small"`, "The decisions of small have drifted above the 2% target: 6 of its latest 20 audited decisions were wrong",
			cascade["message"].(string), `>0.0120<`} {
			if !strings.Contains(r.body, strings.ReplaceAll(want, "'", "&#39;")) {
				t.Errorf("the page lacks %q", want)
			}
		}
		if strings.Contains(r.body, `data-verifier="large"`) {
			t.Error("an unaudited verifier shows a drift alarm")
		}

		other, _ := d.store.FindOrCreateAccountByEmail(ctx, "dave@example.com")
		_, otherKey, _ := d.store.CreateAPIKey(ctx, other.ID, "k", arbiter.Actor{Email: "dave@example.com"})
		if _, report := getCalibration(t, d, otherKey, "task_type=refund"); report["cascade"].(map[string]any)["tasks"] != 0.0 {
			t.Errorf("another account's cascade %v", report["cascade"])
		}
	})
}
