package db_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/taskview"
)

func TestDemoService_PruneDemoVerdicts(t *testing.T) {
	// Not parallel: it changes the package's prune batch for its duration.
	defer db.SetPruneBatch(2)()
	clk := newClock()
	dbtest.Each(t, db.Options{Now: clk.Now}, func(t *testing.T, d *db.DB) {
		tasks, err := d.ListDemoTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		task := tasks[0]
		// Ten verdicts, one session each, an hour apart: the first five
		// are more than 30 days old by the time the store prunes.
		start := clk.Now()
		for i := range 10 {
			session := fmt.Sprintf("anon_%d", i)
			if _, err := d.CreateDemoVerdict(ctx, arbiter.DemoVerdictCreate{TaskID: task.ID, Verdict: task.AllowedVerdicts[0], AnonSessionID: &session}); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Hour)
		}
		kept := func() string {
			t.Helper()
			var s strings.Builder
			for i := range 10 {
				n, err := d.CountDemoVerdicts(ctx, fmt.Sprintf("anon_%d", i))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprint(&s, n)
			}
			return s.String()
		}
		restore := clk.Now()
		clk.Add(start.Add(30*24*time.Hour + 4*time.Hour + time.Minute).Sub(restore))
		defer clk.Add(restore.Sub(clk.Now()))

		if n, err := d.PruneDemoVerdicts(ctx, 30*24*time.Hour, 100); err != nil || n != 5 {
			t.Fatalf("prune by age deleted %d, %v; want the 5 older than 30 days", n, err)
		}
		if got := kept(); got != "0000011111" {
			t.Fatalf("kept %s after pruning by age, want 0000011111", got)
		}
		if n, err := d.PruneDemoVerdicts(ctx, 30*24*time.Hour, 3); err != nil || n != 2 {
			t.Fatalf("prune by count deleted %d, %v; want the 2 beyond the newest 3", n, err)
		}
		if got := kept(); got != "0000000111" {
			t.Fatalf("kept %s after keeping the newest 3, want 0000000111", got)
		}
		if n, err := d.PruneDemoVerdicts(ctx, 30*24*time.Hour, 3); err != nil || n != 0 {
			t.Fatalf("pruning again deleted %d, %v; want nothing", n, err)
		}
		if after, err := d.FindDemoTask(ctx, task.ID); err != nil || after.Status != arbiter.StatusHumanNeeded {
			t.Fatalf("pruning touched the demo task: %+v, %v", after, err)
		}
	})
}

func TestDemoService_RefusesTextItCannotKeep(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		tasks, err := d.ListDemoTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		task := tasks[0]
		session := "anon_bad_text"
		for name, rationale := range map[string]string{
			"NUL":            "fine\x00until here",
			"InvalidUTF8":    "caf\xe9",
			"TooManyBytes":   strings.Repeat("語", arbiter.MaxRationaleBytes/3+1),
			"TooManyChars":   strings.Repeat("a", arbiter.MaxRationaleChars+1),
			"LongSessionID":  "",
			"VerdictTooLong": "",
		} {
			t.Run(name, func(t *testing.T) {
				in := arbiter.DemoVerdictCreate{TaskID: task.ID, Verdict: task.AllowedVerdicts[0], Rationale: &rationale, AnonSessionID: &session}
				switch name {
				case "LongSessionID":
					long := strings.Repeat("é", arbiter.MaxAnonSessionIDBytes/2+1)
					in.AnonSessionID = &long
				case "VerdictTooLong":
					in.Verdict = strings.Repeat("v", arbiter.MaxVerdictChars+1)
				}
				_, err := d.CreateDemoVerdict(ctx, in)
				wantCode(t, err, arbiter.EINVALID)
			})
		}
		if n, err := d.CountDemoVerdicts(ctx, session); err != nil || n != 0 {
			t.Fatalf("%d verdicts stored for refused text, %v", n, err)
		}
		ok := strings.Repeat("語", arbiter.MaxRationaleBytes/3)
		if _, err := d.CreateDemoVerdict(ctx, arbiter.DemoVerdictCreate{TaskID: task.ID, Verdict: task.AllowedVerdicts[0], Rationale: &ok, AnonSessionID: &session}); err != nil {
			t.Fatalf("a rationale within both limits: %v", err)
		}
	})
}

func TestQueueService_DecideTask_RefusesTextItCannotKeep(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		alice := newAccount(t, d, "alice@example.com")
		task := humanNeeded(t, d, alice.ID)
		for name, dec := range map[string]arbiter.HumanDecision{
			"NUL":            {Verdict: "approve", Rationale: "ok\x00", Reviewer: "alice@example.com"},
			"InvalidUTF8":    {Verdict: "approve", Rationale: "\xff\xfe", Reviewer: "alice@example.com"},
			"TooManyBytes":   {Verdict: "approve", Rationale: strings.Repeat("語", arbiter.MaxRationaleBytes/3+1), Reviewer: "alice@example.com"},
			"NoReviewer":     {Verdict: "approve", Reviewer: " "},
			"VerdictTooLong": {Verdict: strings.Repeat("v", 1<<20), Reviewer: "alice@example.com"},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := d.DecideTask(ctx, alice.ID, task.ID, dec)
				wantCode(t, err, arbiter.EINVALID)
				if len(arbiter.ErrorMessage(err)) > 500 {
					t.Errorf("the error repeats the input: %.100s…", arbiter.ErrorMessage(err))
				}
			})
		}
		if got, err := d.FindTaskByID(ctx, alice.ID, task.ID); err != nil || got.Status != arbiter.StatusHumanNeeded || len(got.Attempts) != 1 {
			t.Fatalf("a refused decision changed the task: %+v, %v", got, err)
		}
	})
}

func TestDemoService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		if err := d.SeedDemo(ctx); err != nil {
			t.Fatalf("seeding twice: %v", err)
		}
		tasks, err := d.ListDemoTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) < 8 {
			t.Fatalf("demo queue has %d tasks, want at least 8", len(tasks))
		}
		for _, task := range tasks {
			var ctxObj map[string]any
			if !arbiter.ValidTaskID(task.ID) || json.Unmarshal(task.Context, &ctxObj) != nil || len(task.AllowedVerdicts) < 2 {
				t.Fatalf("demo task %+v", task)
			}
		}
		first := tasks[0]
		session := "anon_1"
		v, err := d.CreateDemoVerdict(ctx, arbiter.DemoVerdictCreate{TaskID: first.ID, Verdict: first.AllowedVerdicts[0], AnonSessionID: &session})
		if err != nil || v.TaskID != first.ID || *v.AnonSessionID != session {
			t.Fatalf("verdict = %+v, %v", v, err)
		}
		_, err = d.CreateDemoVerdict(ctx, arbiter.DemoVerdictCreate{TaskID: first.ID, Verdict: "maybe"})
		wantCode(t, err, arbiter.EINVALID)

		owner := newAccount(t, d, "real@example.com")
		real, _ := d.CreateTask(ctx, owner.ID, taskCreate("real"))
		_, err = d.CreateDemoVerdict(ctx, arbiter.DemoVerdictCreate{TaskID: real.ID, Verdict: "approve"})
		wantCode(t, err, arbiter.ENOTFOUND)

		if n, err := d.CountDemoVerdicts(ctx, session); err != nil || n != 1 {
			t.Fatalf("count = %d, %v", n, err)
		}
		after, err := d.FindDemoTask(ctx, first.ID)
		if err != nil || after.Status != arbiter.StatusHumanNeeded || after.FinalVerdict != nil || len(after.Attempts) != 1 {
			t.Fatalf("demo task changed: %+v, %v", after, err)
		}
	})
}

func TestDemoService_VerifierAnswers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		// Seeded twice (dbtest seeds once): still one answer per task.
		if err := d.SeedDemo(ctx); err != nil {
			t.Fatal(err)
		}
		tasks, _ := d.ListDemoTasks(ctx)
		for _, listed := range tasks {
			task, err := d.FindDemoTask(ctx, listed.ID)
			if err != nil || len(task.Attempts) != 1 {
				t.Fatalf("%s has %d attempts (%v), want the verifier's one", listed.ID, len(task.Attempts), err)
			}
			a := task.Attempts[0]
			if a.Tier != arbiter.TierAgent || a.Verdict == nil || !task.Allows(*a.Verdict) || a.Confidence == nil ||
				*a.Confidence <= 0 || *a.Confidence >= task.ConfidenceThreshold || len(a.Rationale) < 40 ||
				a.Model == nil || *a.Model != "demo-verifier" || a.Error != nil || a.FinishedAt == nil {
				t.Errorf("%s: the verifier's answer = %+v, want an allowed verdict under the threshold, with a rationale", task.ID, a)
			}
		}
	})
}

func TestDemoService_AnswersAddedToAnOldDemo(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			d := dbtest.OpenURL(t, url, db.Options{})
			driver, dsn := "postgres", url
			if dialect == db.SQLite {
				driver, dsn = "sqlite", strings.TrimPrefix(url, "sqlite:")
			}
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.Exec(`DELETE FROM attempts WHERE task_id LIKE 'tsk_demo_%'`); err != nil {
				t.Fatal(err)
			}
			if err := d.SeedDemo(ctx); err != nil {
				t.Fatal(err)
			}
			var tasks, attempts int
			raw.QueryRow(`SELECT count(*), (SELECT count(*) FROM attempts WHERE task_id LIKE 'tsk_demo_%')
				FROM tasks WHERE id LIKE 'tsk_demo_%'`).Scan(&tasks, &attempts)
			if tasks == 0 || attempts != tasks {
				t.Errorf("%d demo tasks hold %d attempts after seeding, want one each", tasks, attempts)
			}
		})
	}
}

// demoViews are the views the demo queue's contexts show: every view of
// the desk, each in some task.
func demoViews(t *testing.T, tasks []*arbiter.DemoTask) map[taskview.ViewKind]bool {
	t.Helper()
	seen := map[taskview.ViewKind]bool{}
	var walk func(n *taskview.Node)
	walk = func(n *taskview.Node) {
		if n.View != nil {
			seen[n.View.Kind] = true
			for _, m := range n.View.Messages {
				for _, p := range m.Parts {
					if p.Image != nil {
						seen[taskview.ViewImage] = true
					}
				}
			}
			if n.View.Tool != nil && n.View.Tool.Args != nil {
				walk(n.View.Tool.Args)
			}
		}
		for _, c := range n.Members() {
			walk(c)
		}
	}
	for _, task := range tasks {
		if c := taskview.Parse(task.Context, nil); c != nil && c.Root != nil {
			walk(c.Root)
		}
	}
	return seen
}

// TestDemoService_ShowsEveryView: the demo queue holds a conversation, a
// tool call, an image (shown, and one only linked), a diff, Markdown, a
// link, a date and money; a demo seeded before them gets them too.
func TestDemoService_ShowsEveryView(t *testing.T) {
	t.Parallel()
	all := []taskview.ViewKind{taskview.ViewConversation, taskview.ViewToolCall, taskview.ViewImage, taskview.ViewDiff,
		taskview.ViewMarkdown, taskview.ViewLink, taskview.ViewDate, taskview.ViewMoney}
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		if err := d.Exec(ctx, `UPDATE task_bodies SET context = '{"old":true}' WHERE id LIKE 'tsk_demo_%'`); err != nil {
			t.Fatal(err)
		}
		if err := d.SeedDemo(ctx); err != nil {
			t.Fatal(err)
		}
		tasks, err := d.ListDemoTasks(ctx)
		if err != nil || len(tasks) != 10 {
			t.Fatalf("the demo has %d tasks, %v", len(tasks), err)
		}
		seen := demoViews(t, tasks)
		for _, v := range all {
			if !seen[v] {
				t.Errorf("no demo task shows the %s view (seen %v)", v, seen)
			}
		}
		for _, task := range tasks {
			if strings.Contains(string(task.Context), `"old":true`) {
				t.Errorf("%s keeps its old context", task.ID)
			}
			if found, err := d.FindDemoTask(ctx, task.ID); err != nil || found.Status != arbiter.StatusHumanNeeded || len(found.Attempts) != 1 {
				t.Errorf("%s changed: %+v, %v", task.ID, found, err)
			}
		}
	})
}
