package db_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// heldAccount is an account with a row in every table that holds an
// account's data, and the people and sessions around it.
type heldAccount struct {
	acct                 *arbiter.Account
	owner, admin, rev    *arbiter.Person
	ownerToken, revToken string
	key                  string   // an API key's plaintext
	taskIDs              []string // every task it holds
	messageIDs           []string // its webhook messages that were attempted
}

// holdEverything makes the account of name@example.com and fills it: an
// owner, an admin and a reviewer (also a member of elsewhere, when given),
// a pending invitation, an API key, a webhook endpoint and its messages,
// the callback secret, a decided task with its attempts and labelled pair,
// a keyed task, a reserved and skipped task, a demo verdict, a digest and
// a policy.
func holdEverything(t *testing.T, d *db.DB, name string) *heldAccount {
	t.Helper()
	h := &heldAccount{acct: newAccount(t, d, name+"@example.com")}
	h.owner = personOf(t, d, name+"@example.com")
	join := func(email, role string) *arbiter.Person {
		token := invite(t, d, h.acct.ID, email, role, h.owner)
		p := personOf(t, d, email)
		if _, err := d.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h.admin = join(name+"-admin@example.com", arbiter.RoleAdmin)
	h.rev = join(name+"-rev@example.com", arbiter.RoleReviewer)
	invite(t, d, h.acct.ID, name+"-later@example.com", arbiter.RoleReviewer, h.owner)
	var err error
	if _, h.ownerToken, err = d.CreateSession(ctx, h.owner.ID, arbiter.SignInEmail, arbiter.Client{}); err != nil {
		t.Fatal(err)
	}
	revSession, revToken, err := d.CreateSession(ctx, h.rev.ID, arbiter.SignInEmail, arbiter.Client{})
	if err != nil {
		t.Fatal(err)
	}
	h.revToken = revToken
	if _, h.key, err = d.CreateAPIKey(ctx, h.acct.ID, "ci", actor(h.owner)); err != nil {
		t.Fatal(err)
	}
	newWebhookEndpoint(t, d, h.acct.ID)
	if _, err := d.PutPolicy(ctx, h.acct.ID, arbiter.Policy{TaskType: arbiter.DefaultPolicyName, DeadlineSeconds: ptr(600)}, actor(h.owner)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.FindCallbackSecret(ctx, h.acct.ID); err != nil {
		t.Fatal(err)
	}

	decided := humanNeeded(t, d, h.acct.ID) // an attempt, and a webhook message
	if _, err := d.DecideTask(ctx, h.acct.ID, decided.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: h.rev.Email, ReviewerID: h.rev.ID}); err != nil {
		t.Fatal(err)
	}
	if err := d.InsertLabelledPairs(ctx, []arbiter.LabelledPair{{TaskID: decided.ID, AccountID: h.acct.ID, TaskType: "decide",
		Source: "s", Confidence: 0.5, AgentVerdict: "reject", HumanVerdict: "approve", Weight: 1,
		CreatedAt: decided.CreatedAt, LabelledAt: decided.CreatedAt}}); err != nil {
		t.Fatal(err)
	}
	keyedTask := createOne(t, d, h.acct.ID, keyed("Keyed?", "key-1"))
	skipped := humanNeeded(t, d, h.acct.ID)
	if _, err := d.ReserveTask(ctx, h.acct.ID, skipped.ID, h.rev.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.ReleaseTask(ctx, h.acct.ID, skipped.ID, h.rev.ID, revSession.ID, true); err != nil {
		t.Fatal(err)
	}
	reserved := humanNeeded(t, d, h.acct.ID)
	if _, err := d.ReserveTask(ctx, h.acct.ID, reserved.ID, h.rev.ID); err != nil {
		t.Fatal(err)
	}
	h.taskIDs = []string{decided.ID, keyedTask.Task.ID, skipped.ID, reserved.ID}
	// Its webhook messages are tried once each, and fail.
	claimed, err := d.ClaimWebhookMessages(ctx, "whd", 100, time.Minute)
	if err != nil || len(claimed) == 0 {
		t.Fatalf("claimed %d webhook messages (%v)", len(claimed), err)
	}
	for _, del := range claimed {
		step := arbiter.WebhookStep{Attempt: arbiter.WebhookAttempt{StatusCode: 500, AttemptedAt: del.Message.CreatedAt}, Status: arbiter.WebhookFailed}
		if _, err := d.RecordWebhookAttempt(ctx, "whd", del.Message.ID, step); err != nil {
			t.Fatal(err)
		}
		h.messageIDs = append(h.messageIDs, del.Message.ID)
	}
	if err := d.Exec(ctx, `INSERT INTO demo_verdicts (id, task_id, verdict, created_at) VALUES (?, ?, 'approve', 1)`,
		"dv_"+name, reserved.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Exec(ctx, `INSERT INTO digests (account_id, person_id, hour, claimed_at) VALUES (?, ?, 1, 1)`,
		h.acct.ID, h.rev.ID); err != nil {
		t.Fatal(err)
	}
	return h
}

// heldRows counts, table by table, the rows the account holds.
func heldRows(t *testing.T, d *db.DB, h *heldAccount) map[string]int {
	t.Helper()
	tasks := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(h.taskIDs)), ", ") + ")"
	taskArgs := make([]any, len(h.taskIDs))
	for i, id := range h.taskIDs {
		taskArgs[i] = id
	}
	counts := map[string]int{}
	count := func(table, query string, args ...any) {
		n, err := d.Count(ctx, query, args...)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		counts[table] = n
	}
	for _, table := range []string{"webhook_messages", "webhook_endpoints", "webhook_callback_secrets", "idempotency_keys",
		"labelled_pairs", "tasks", "daily_usage", "api_keys", "audit_events", "invitations", "digests", "memberships", "sessions"} {
		count(table, `SELECT count(*) FROM `+table+` WHERE account_id = ?`, h.acct.ID)
	}
	count("accounts", `SELECT count(*) FROM accounts WHERE id = ?`, h.acct.ID)
	for _, table := range []string{"attempts", "demo_verdicts", "session_skips"} {
		count(table, `SELECT count(*) FROM `+table+` WHERE task_id IN `+tasks, taskArgs...)
	}
	count("tasks by id", `SELECT count(*) FROM tasks WHERE id IN `+tasks, taskArgs...)
	messageArgs := make([]any, len(h.messageIDs))
	for i, id := range h.messageIDs {
		messageArgs[i] = id
	}
	count("webhook_attempts", `SELECT count(*) FROM webhook_attempts WHERE message_id IN (`+
		strings.TrimSuffix(strings.Repeat("?, ", len(h.messageIDs)), ", ")+`)`, messageArgs...)
	return counts
}

// TestAccountService_DeleteAccount: an owner's deletion removes every row
// the account held, and nothing of another account; its members keep
// their other accounts; admins, reviewers, a wrong name, another account's
// owner and the demo account change nothing.
func TestAccountService_DeleteAccount(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		gone := holdEverything(t, d, "gone")
		kept := holdEverything(t, d, "kept")
		// The reviewer of the deleted account also reviews for the other.
		token := invite(t, d, kept.acct.ID, gone.rev.Email, arbiter.RoleReviewer, kept.owner)
		if _, err := d.AcceptInvitation(ctx, token, gone.rev.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		before := heldRows(t, d, gone)
		keptBefore := heldRows(t, d, kept)
		for table, n := range before {
			if n == 0 {
				t.Fatalf("the fixture holds no %s, so their deletion would prove nothing", table)
			}
		}

		// Refused, changing nothing: the admin, the reviewer, the other
		// account's owner, a wrong or empty name, and no one may delete
		// the demo account.
		name := gone.acct.Email
		wantCode(t, d.DeleteAccount(ctx, gone.acct.ID, name, actor(gone.admin)), arbiter.ENOTFOUND)
		wantCode(t, d.DeleteAccount(ctx, gone.acct.ID, name, actor(gone.rev)), arbiter.ENOTFOUND)
		wantCode(t, d.DeleteAccount(ctx, gone.acct.ID, name, actor(kept.owner)), arbiter.ENOTFOUND)
		wantCode(t, d.DeleteAccount(ctx, gone.acct.ID, kept.acct.Email, actor(gone.owner)), arbiter.EINVALID)
		wantCode(t, d.DeleteAccount(ctx, gone.acct.ID, "", actor(gone.owner)), arbiter.EINVALID)
		wantCode(t, d.DeleteAccount(ctx, "acct_nothere", "x@example.com", actor(gone.owner)), arbiter.ENOTFOUND)
		wantCode(t, d.DeleteAccount(ctx, arbiter.DemoAccountID, arbiter.DemoAccountEmail, arbiter.Actor{}), arbiter.EINVALID)
		if after := heldRows(t, d, gone); !sameCounts(after, before) {
			t.Fatalf("a refused deletion changed rows: %v, was %v", after, before)
		}

		// The owner deletes it, typing its name in another case with spaces.
		if err := d.DeleteAccount(ctx, gone.acct.ID, "  "+strings.ToUpper(name)+" ", actor(gone.owner)); err != nil {
			t.Fatal(err)
		}
		for table, n := range heldRows(t, d, gone) {
			if n != 0 {
				t.Errorf("%d rows of %s are left", n, table)
			}
		}
		if after := heldRows(t, d, kept); !sameCounts(after, keptBefore) {
			t.Errorf("the other account's rows changed: %v, was %v", after, keptBefore)
		}
		if _, err := d.FindAccountByID(ctx, gone.acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("find the deleted account: %v", err)
		}
		if _, err := d.FindAPIKeyByHash(ctx, arbiter.HashToken(gone.key)); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("its key is still found: %v", err)
		}
		// A create that still trusted its key is refused, not failed.
		_, err := d.CreateTask(ctx, gone.acct.ID, taskCreate("late"))
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		created, err := d.CreateTasks(ctx, gone.acct.ID, []arbiter.TaskCreate{taskCreate("a"), taskCreate("b")})
		if arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED || created != nil {
			t.Errorf("late batch = %+v, %v", created, err)
		}

		// The sessions fall back: the owner to none, the reviewer to the
		// account they still review for.
		s, err := d.FindSessionByToken(ctx, gone.ownerToken)
		if err != nil || s.AccountID != "" || len(s.Accounts) != 0 {
			t.Errorf("owner's session = %+v, %v", s, err)
		}
		s, err = d.FindSessionByToken(ctx, gone.revToken)
		if err != nil || s.AccountID != kept.acct.ID || s.Role != arbiter.RoleReviewer || len(s.Accounts) != 1 {
			t.Errorf("reviewer's session = %+v, %v", s, err)
		}
		// The owner's next sign-in starts an account of their own afresh.
		p, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGitHub, Subject: "gone-owner", Email: name, EmailVerified: true})
		if err != nil || p.ID != gone.owner.ID {
			t.Fatalf("sign-in = %+v, %v", p, err)
		}
		fresh, err := d.FindAccountByEmail(ctx, name)
		if err != nil || fresh.ID == gone.acct.ID {
			t.Fatalf("fresh account = %+v, %v", fresh, err)
		}
		if used, _, err := d.UsageToday(ctx, fresh.ID); err != nil || used != 0 {
			t.Errorf("the fresh account's usage = %d, %v", used, err)
		}
	})
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDeleteAccount_OutlastsADeadlock: a decision in flight holds one of
// the account's tasks and then writes to its audit log, while the deletion
// holds the account and waits for the task. Postgres aborts one of them;
// the deletion still completes, and leaves nothing behind.
func TestDeleteAccount_OutlastsADeadlock(t *testing.T) {
	// Not parallel: it waits for a lock wait in pg_stat_activity, which sees
	// the sessions of every test in the database.
	d := dbtest.Open(t, db.Postgres, db.Options{})
	acct := newAccount(t, d, "owner@example.com")
	owner := personOf(t, d, "owner@example.com")
	task := humanNeeded(t, d, acct.ID)
	raw := openRaw(t, db.Postgres, d.URLForTest())
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SELECT id FROM task_states WHERE id = $1 FOR UPDATE`, task.ID); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- d.DeleteAccount(ctx, acct.ID, acct.Email, actor(owner)) }()
	// The deletion holds the account and waits for the task.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%FROM task_states WHERE account_id%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deletion does not wait for the held task")
		}
	}
	// The decision writes its audit line: a deadlock, which Postgres
	// breaks by aborting the transaction that waited first, the deletion's.
	_, err = tx.Exec(`INSERT INTO audit_events (account_id, kind, actor, detail, client_ip, user_agent, created_at)
		VALUES ($1, 'review_decided', 'rev@example.com', '', '', '', 1)`, acct.ID)
	if err == nil {
		err = tx.Commit()
	} else {
		tx.Rollback()
	}
	t.Logf("the decision's transaction: %v", err)
	if err := <-deleted; err != nil {
		t.Fatalf("the deletion: %v", err)
	}
	for _, table := range []string{"tasks", "audit_events", "memberships"} {
		if n, err := d.Count(ctx, `SELECT count(*) FROM `+table+` WHERE account_id = ?`, acct.ID); err != nil || n != 0 {
			t.Errorf("%d rows of %s are left (%v)", n, table, err)
		}
	}
}

// TestDeleteAccount_AnAttemptCommittedMidDeletion: a verifier's answer
// holds one of the account's tasks, with its attempt written but not yet
// committed, when the deletion starts; it commits while the deletion waits.
// The deletion neither fails on the attempt's foreign key nor leaves it
// behind. Before the deletion locked the tasks, this interleaving failed it
// on attempts_task_id_fkey every time.
func TestDeleteAccount_AnAttemptCommittedMidDeletion(t *testing.T) {
	// Not parallel: it waits for a lock wait in pg_stat_activity, which sees
	// the sessions of every test in the database.
	d := dbtest.Open(t, db.Postgres, db.Options{})
	acct := newAccount(t, d, "owner@example.com")
	owner := personOf(t, d, "owner@example.com")
	task, err := d.CreateTask(ctx, acct.ID, taskCreate("Refund?"))
	if err != nil {
		t.Fatal(err)
	}
	raw := openRaw(t, db.Postgres, d.URLForTest())
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// What a finish does: the task first, then its attempt.
	if _, err := tx.Exec(`UPDATE task_states SET failures = failures + 1 WHERE id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO attempts (task_id, tier, rationale, error, started_at, finished_at)
		VALUES ($1, 'agent', '', 'timeout', 1, 2)`, task.ID); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- d.DeleteAccount(ctx, acct.ID, acct.Email, actor(owner)) }()
	// The deletion waits for the task the finish holds.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%task_states%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deletion does not wait for the held task")
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("the deletion: %v", err)
	}
	if n, err := d.Count(ctx, `SELECT count(*) FROM attempts WHERE task_id = ?`, task.ID); err != nil || n != 0 {
		t.Errorf("%d attempts of the deleted task are left (%v)", n, err)
	}
}

// TestDeleteAccount_WhileTheWorkerWritesAttempts: four workers claim the
// account's tasks and record failed calls (each puts its task back to be
// claimed again), in a bounded loop, while the owner deletes the account.
// The deletion succeeds on its first call and leaves no task and no
// attempt; the workers' late finishes are refused as not found or lost,
// never with an internal error.
func TestDeleteAccount_WhileTheWorkerWritesAttempts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		in := make([]arbiter.TaskCreate, 200)
		for i := range in {
			in[i] = taskCreate("Refund?")
		}
		created, err := d.CreateTasks(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		var written atomic.Int64
		done := make(chan struct{})
		errs := make(chan error, 4)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("w%d", w)
				for range 2000 {
					claimed, err := d.ClaimTasks(ctx, owner, 5, time.Minute)
					if err != nil {
						errs <- fmt.Errorf("claim: %w", err)
						return
					}
					if len(claimed) == 0 {
						select {
						case <-done:
							return
						default:
							continue
						}
					}
					for _, c := range claimed {
						failure := "timeout"
						err := d.FinishAgentAttempt(ctx, owner, c.ID, arbiter.AgentStep{
							Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Error: &failure, StartedAt: 1},
							Next:    arbiter.StatusPending,
						})
						switch code := arbiter.ErrorCode(err); {
						case err == nil:
							written.Add(1)
						case code == arbiter.ENOTFOUND || code == arbiter.ECONFLICT:
						default:
							errs <- fmt.Errorf("finish: %w", err)
							return
						}
					}
				}
			}()
		}
		// Delete once the workers are well under way.
		for deadline := time.Now().Add(30 * time.Second); written.Load() < 50; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the workers wrote %d attempts in 30 s", written.Load())
			}
		}
		err = d.DeleteAccount(ctx, acct.ID, acct.Email, actor(owner))
		close(done)
		wg.Wait()
		close(errs)
		if err != nil {
			t.Fatalf("the deletion: %v (code %q)", err, arbiter.ErrorCode(err))
		}
		for err := range errs {
			t.Errorf("a worker: %v", err)
		}
		if n, err := d.Count(ctx, `SELECT count(*) FROM tasks WHERE account_id = ?`, acct.ID); err != nil || n != 0 {
			t.Errorf("%d tasks are left (%v)", n, err)
		}
		ids := make([]any, len(created))
		for i, c := range created {
			ids[i] = c.Task.ID
		}
		if n, err := d.Count(ctx, `SELECT count(*) FROM attempts WHERE task_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, ids...); err != nil || n != 0 {
			t.Errorf("%d attempts are left (%v)", n, err)
		}
		t.Logf("%d attempts written while the deletion ran", written.Load())
	})
}
