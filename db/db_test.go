package db_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

var ctx = context.Background()

func newAccount(t *testing.T, d *db.DB, email string) *arbiter.Account {
	t.Helper()
	a, err := d.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	return a
}

func taskCreate(prompt string) arbiter.TaskCreate {
	return arbiter.TaskCreate{
		Prompt:              prompt,
		AllowedVerdicts:     []string{"approve", "reject"},
		ConfidenceThreshold: 0.9,
		TaskType:            "decide",
		Touchpoint:          "chat",
		Context:             json.RawMessage(`{"amount":12}`),
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := arbiter.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func TestTaskService_CreateTask(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		created, err := d.CreateTask(ctx, acct.ID, taskCreate("Refund?"))
		if err != nil {
			t.Fatal(err)
		}
		if !arbiter.ValidTaskID(created.ID) || created.Status != arbiter.StatusPending {
			t.Fatalf("created = %+v", created)
		}
		got, err := d.FindTaskByID(ctx, acct.ID, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Prompt != "Refund?" || got.ConfidenceThreshold != 0.9 || len(got.AllowedVerdicts) != 2 ||
			got.AllowedVerdicts[1] != "reject" || string(got.Context) != `{"amount":12}` ||
			got.CreatedAt != created.CreatedAt || got.FinalVerdict != nil || got.CompletedAt != nil {
			t.Fatalf("found = %+v", got)
		}
		if got.Attempts == nil || len(got.Attempts) != 0 {
			t.Fatalf("attempts = %#v, want empty non-nil", got.Attempts)
		}
	})
}

func TestTaskService_FindTaskByID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		owner := newAccount(t, d, "owner@example.com")
		other := newAccount(t, d, "other@example.com")
		task, err := d.CreateTask(ctx, owner.ID, taskCreate("Mine"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run("ErrNotFoundAcrossAccounts", func(t *testing.T) {
			_, err := d.FindTaskByID(ctx, other.ID, task.ID)
			wantCode(t, err, arbiter.ENOTFOUND)
		})
		for _, id := range []string{"tsk_0000000000000000", "tsk_xyz", "", "'; DROP TABLE tasks; --", "tsk_demo_refund_late_delivery"} {
			_, err := d.FindTaskByID(ctx, owner.ID, id)
			wantCode(t, err, arbiter.ENOTFOUND)
		}
	})
}

func TestTaskService_DailyCap(t *testing.T) {
	t.Parallel()
	t.Run("ConcurrentCreatesAdmitExactlyTheCap", func(t *testing.T) {
		dbtest.Each(t, db.Options{DailyTaskCap: 10}, func(t *testing.T, d *db.DB) {
			acct := newAccount(t, d, "busy@example.com")
			var ok, limited atomic.Int32
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					_, err := d.CreateTask(ctx, acct.ID, taskCreate("Concurrent"))
					switch arbiter.ErrorCode(err) {
					case "":
						ok.Add(1)
					case arbiter.ERATELIMIT:
						limited.Add(1)
					default:
						t.Errorf("unexpected error: %v", err)
					}
				})
			}
			wg.Wait()
			if ok.Load() != 10 || limited.Load() != 40 {
				t.Fatalf("admitted %d, limited %d; want 10 and 40", ok.Load(), limited.Load())
			}
			used, limit, err := d.UsageToday(ctx, acct.ID)
			if err != nil || used != 10 || limit != 10 {
				t.Fatalf("usage = %d/%d, %v", used, limit, err)
			}
		})
	})
	t.Run("OverrideAndRetryAfter", func(t *testing.T) {
		now := time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC)
		dbtest.Each(t, db.Options{DailyTaskCap: 1, Now: func() time.Time { return now }}, func(t *testing.T, d *db.DB) {
			acct := newAccount(t, d, "capped@example.com")
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("first")); err != nil {
				t.Fatal(err)
			}
			_, err := d.CreateTask(ctx, acct.ID, taskCreate("second"))
			wantCode(t, err, arbiter.ERATELIMIT)
			if e := err.(*arbiter.Error); e.RetryAfter != time.Hour {
				t.Fatalf("RetryAfter = %v, want 1h until midnight UTC", e.RetryAfter)
			}
			three := 3
			if err := d.SetDailyCap(ctx, acct.ID, &three); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := d.CreateTask(ctx, acct.ID, taskCreate("raised")); err != nil {
					t.Fatal(err)
				}
			}
			_, err = d.CreateTask(ctx, acct.ID, taskCreate("over"))
			wantCode(t, err, arbiter.ERATELIMIT)
			zero := 0
			_ = d.SetDailyCap(ctx, acct.ID, &zero)
			other := newAccount(t, d, "other@example.com")
			if _, err := d.CreateTask(ctx, other.ID, taskCreate("own cap")); err != nil {
				t.Fatalf("another account's cap is its own: %v", err)
			}
			neg := -1
			wantCode(t, d.SetDailyCap(ctx, acct.ID, &neg), arbiter.EINVALID)
			wantCode(t, d.SetDailyCap(ctx, "acct_missing", nil), arbiter.ENOTFOUND)
		})
	})
}

func TestAPIKeyService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "keys@example.com")
		other := newAccount(t, d, "other@example.com")
		k, plaintext, err := d.CreateAPIKey(ctx, acct.ID, "  ci  ", arbiter.Actor{Email: "test@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if !arbiter.ValidAPIKey(plaintext) || k.Name != "ci" || k.Hash != arbiter.HashAPIKey(plaintext) || k.Prefix != plaintext[:13] {
			t.Fatalf("key = %+v, plaintext %q", k, plaintext)
		}
		found, err := d.FindAPIKeyByHash(ctx, arbiter.HashAPIKey(plaintext))
		if err != nil || found.ID != k.ID || found.AccountID != acct.ID {
			t.Fatalf("found = %+v, %v", found, err)
		}
		_, err = d.FindAPIKeyByHash(ctx, arbiter.HashAPIKey(arbiter.NewAPIKeyPlaintext()))
		wantCode(t, err, arbiter.ENOTFOUND)

		t.Run("ErrInvalidName", func(t *testing.T) {
			_, _, err := d.CreateAPIKey(ctx, acct.ID, " ", arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.EINVALID)
			_, _, err = d.CreateAPIKey(ctx, "acct_missing", "x", arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.ENOTFOUND)
		})
		t.Run("TouchNeverGoesBack", func(t *testing.T) {
			if err := d.TouchAPIKeys(ctx, map[string]arbiter.Timestamp{k.ID: 2000}); err != nil {
				t.Fatal(err)
			}
			if err := d.TouchAPIKeys(ctx, map[string]arbiter.Timestamp{k.ID: 1000}); err != nil {
				t.Fatal(err)
			}
			got, _ := d.FindAPIKeyByID(ctx, k.ID)
			if got.LastUsedAt == nil || *got.LastUsedAt != 2000 {
				t.Fatalf("last_used_at = %v, want 2000", got.LastUsedAt)
			}
		})
		t.Run("Revoke", func(t *testing.T) {
			_, err := d.RevokeAPIKey(ctx, other.ID, k.ID, arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.ENOTFOUND)
			revoked, err := d.RevokeAPIKey(ctx, acct.ID, k.ID, arbiter.Actor{Email: "test@example.com"})
			if err != nil || revoked.RevokedAt == nil {
				t.Fatalf("revoke = %+v, %v", revoked, err)
			}
			_, err = d.RevokeAPIKey(ctx, "", k.ID, arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.ECONFLICT)
			keys, err := d.ListAPIKeys(ctx, acct.ID)
			if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil {
				t.Fatalf("revoked keys stay listed: %+v, %v", keys, err)
			}
		})
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

// TestDemoService_AnswersAddedToAnOldDemo seeds a store whose demo tasks
// were seeded before they had verifier answers: they gain one each.
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

func TestHealthService(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	dbtest.Each(t, db.Options{Now: clock}, func(t *testing.T, d *db.DB) {
		wantCode(t, d.Health(ctx), arbiter.EUNAVAILABLE)
		if err := d.Heartbeat(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := d.Health(ctx); err != nil {
			t.Fatalf("fresh heartbeat: %v", err)
		}
		now = now.Add(db.HeartbeatMaxAge + time.Second)
		wantCode(t, d.Health(ctx), arbiter.EUNAVAILABLE)
		now = time.Now()
	})
}

func TestAccountService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "Person@Example.com")
		b := newAccount(t, d, "person@example.com")
		if a.ID != b.ID || a.Email != "person@example.com" {
			t.Fatalf("same e-mail, two accounts: %+v %+v", a, b)
		}
		_, err := d.FindOrCreateAccountByEmail(ctx, "not an address")
		wantCode(t, err, arbiter.EINVALID)
		_, err = d.FindAccountByEmail(ctx, "nobody@example.com")
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}
