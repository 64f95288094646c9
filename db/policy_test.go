package db_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// parsedCreate is a create as the API parses it: the fields it leaves
// out are the policy's to fill.
func parsedCreate(t *testing.T, body string) arbiter.TaskCreate {
	t.Helper()
	in, err := arbiter.ParseTaskCreate([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestPolicyService(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		token := invite(t, d, acct.ID, "rev@example.com", arbiter.RoleReviewer, owner)
		rev := personOf(t, d, "rev@example.com")
		if _, err := d.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		other := newAccount(t, d, "other@example.com")

		if got, err := d.ListPolicies(ctx, acct.ID); err != nil || len(got) != 0 {
			t.Fatalf("a new account's policies: %v, %v", got, err)
		}
		refund := arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ptr(0.95), DeadlineSeconds: ptr(600),
			OnExpiry: arbiter.OnExpiry{Outcome: "agent_verdict", AgentFloor: ptr(0.9), Fallback: "verdict:reject"}}
		if _, err := d.PutPolicy(ctx, acct.ID, refund, actor(owner)); err != nil {
			t.Fatal(err)
		}
		if _, err := d.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "default", AuditRate: ptr(0.1)}, arbiter.Actor{}); err != nil {
			t.Fatal(err)
		}
		got, err := d.FindPolicy(ctx, acct.ID, "refund")
		if err != nil {
			t.Fatal(err)
		}
		if *got.ConfidenceThreshold != 0.95 || *got.DeadlineSeconds != 600 || got.AuditRate != nil ||
			got.OnExpiry.Outcome != "agent_verdict" || *got.OnExpiry.AgentFloor != 0.9 || got.OnExpiry.Fallback != "verdict:reject" {
			t.Errorf("found %+v (%+v), want what was put", got, got.OnExpiry)
		}
		list, err := d.ListPolicies(ctx, acct.ID)
		if err != nil || len(list) != 2 || list[0].TaskType != "default" || list[1].TaskType != "refund" {
			t.Errorf("list = %+v, %v", list, err)
		}

		// Replaced, not added to.
		refund.OnExpiry = arbiter.OnExpiry{}
		refund.ConfidenceThreshold = nil
		if _, err := d.PutPolicy(ctx, acct.ID, refund, actor(owner)); err != nil {
			t.Fatal(err)
		}
		if got, _ := d.FindPolicy(ctx, acct.ID, "refund"); got.ConfidenceThreshold != nil || !got.OnExpiry.IsExpire() {
			t.Errorf("replaced = %+v", got)
		}

		// Reviewers cannot change policies; other accounts see none.
		_, err = d.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "x"}, actor(rev))
		wantCode(t, err, arbiter.ENOTFOUND)
		wantCode(t, d.DeletePolicy(ctx, acct.ID, "refund", actor(rev)), arbiter.ENOTFOUND)
		_, err = d.FindPolicy(ctx, other.ID, "refund")
		wantCode(t, err, arbiter.ENOTFOUND)
		wantCode(t, d.DeletePolicy(ctx, other.ID, "refund", arbiter.Actor{}), arbiter.ENOTFOUND)
		_, err = d.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "x", DeadlineSeconds: ptr(1)}, actor(owner))
		wantCode(t, err, arbiter.EINVALID)

		if err := d.DeletePolicy(ctx, acct.ID, "refund", actor(owner)); err != nil {
			t.Fatal(err)
		}
		_, err = d.FindPolicy(ctx, acct.ID, "refund")
		wantCode(t, err, arbiter.ENOTFOUND)
		wantCode(t, d.DeletePolicy(ctx, acct.ID, "refund", actor(owner)), arbiter.ENOTFOUND)

		events, err := d.ListAuditEvents(ctx, acct.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range events {
			if strings.HasPrefix(e.Kind, "policy_") {
				kinds = append(kinds, e.Kind+" "+e.Actor+" "+e.Detail)
			}
		}
		want := []string{
			"policy_deleted owner@example.com refund",
			"policy_changed owner@example.com refund (deadline 600s, on expiry: expire)",
			"policy_changed an API key default (audit rate 0.1, on expiry: expire)",
			"policy_changed owner@example.com refund (threshold 0.95, deadline 600s, on expiry: the agent's verdict at confidence 0.9 or more, else reject)",
		}
		if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
			t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestTaskService_CreateTask_Policy(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		put := func(p arbiter.Policy) {
			t.Helper()
			if _, err := d.PutPolicy(ctx, acct.ID, p, arbiter.Actor{}); err != nil {
				t.Fatal(err)
			}
		}
		put(arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ptr(0.97), DeadlineSeconds: ptr(600), AuditRate: ptr(0.5),
			OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}})
		put(arbiter.Policy{TaskType: "default", DeadlineSeconds: ptr(120)})
		const refund = `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund"`

		check := func(name string, task *arbiter.Task, threshold float64, deadline int, onExpiry string) {
			t.Helper()
			for _, got := range []*arbiter.Task{task, mustFind(t, d, acct.ID, task.ID)} {
				gotDeadline := 0
				if got.DeadlineAt != nil {
					gotDeadline = int(*got.DeadlineAt-got.CreatedAt) / 1000
				}
				if got.ConfidenceThreshold != threshold || gotDeadline != deadline || got.OnExpiry.Outcome != onExpiry {
					t.Errorf("%s: threshold %v, deadline %d s, on_expiry %q; want %v, %d, %q",
						name, got.ConfidenceThreshold, gotDeadline, got.OnExpiry.Outcome, threshold, deadline, onExpiry)
				}
			}
		}

		taken, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, refund+`}`))
		if err != nil {
			t.Fatal(err)
		}
		check("without fields", taken, 0.97, 600, "verdict:reject")
		if taken.AuditRate == nil || *taken.AuditRate != 0.5 {
			t.Errorf("audit rate %v, want the policy's 0.5", taken.AuditRate)
		}
		overridden, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, refund+`,"confidence_threshold":0.6,"deadline_seconds":60,"on_expiry":"verdict:approve"}`))
		if err != nil {
			t.Fatal(err)
		}
		check("with fields", overridden, 0.6, 60, "verdict:approve")
		other, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, `{"prompt":"p","allowed_verdicts":["yes"],"task_type":"other"}`))
		if err != nil {
			t.Fatal(err)
		}
		check("another type takes the default policy", other, arbiter.DefaultConfidenceThreshold, 120, "")
		inCode, err := d.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"a"}, TaskType: "refund", ConfidenceThreshold: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		check("a create in code", inCode, 0.5, 0, "")

		// A batch: the item whose verdicts the policy's outcome lacks is
		// refused alone.
		out, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{
			parsedCreate(t, refund+`}`),
			parsedCreate(t, `{"prompt":"p","allowed_verdicts":["yes","no"],"task_type":"refund"}`),
			parsedCreate(t, refund+`,"deadline_seconds":3600}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Err != nil || out[2].Err != nil || arbiter.ErrorField(out[1].Err) != "on_expiry" {
			t.Fatalf("batch = %+v", out)
		}
		check("batch item 0", out[0].Task, 0.97, 600, "verdict:reject")
		check("batch item 2", out[2].Task, 0.97, 3600, "verdict:reject")
		_, err = d.CreateTask(ctx, acct.ID, parsedCreate(t, `{"prompt":"p","allowed_verdicts":["yes","no"],"task_type":"refund"}`))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), `"reject"`) {
			t.Errorf("a create the policy's outcome cannot decide: %v, want EINVALID naming the verdict", err)
		}

		// A policy change leaves the tasks already created alone.
		put(arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ptr(0.1), DeadlineSeconds: ptr(60)})
		check("after the change", mustFind(t, d, acct.ID, taken.ID), 0.97, 600, "verdict:reject")
		changed, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, refund+`}`))
		if err != nil {
			t.Fatal(err)
		}
		check("created after the change", changed, 0.1, 60, "")
		if err := d.DeletePolicy(ctx, acct.ID, "refund", arbiter.Actor{}); err != nil {
			t.Fatal(err)
		}
		check("after the delete, the default", createOne(t, d, acct.ID, parsedCreate(t, refund+`}`)).Task, arbiter.DefaultConfidenceThreshold, 120, "")

		// An idempotency key replays across a policy change: the key
		// matches the request, not what the policy made of it.
		keyedIn := parsedCreate(t, refund+`}`)
		keyedIn.IdempotencyKey = "k-1"
		first := createOne(t, d, acct.ID, keyedIn)
		put(arbiter.Policy{TaskType: "default", DeadlineSeconds: ptr(900)})
		if again := createOne(t, d, acct.ID, keyedIn); again.Err != nil || !again.Replayed || again.Task.ID != first.Task.ID {
			t.Errorf("replay after a policy change = %+v", again)
		}

		if d.Dialect() == db.Postgres {
			// Concurrent creates share a statement, which stores the
			// outcome too.
			in := taskCreate("g")
			in.DeadlineSeconds, in.OnExpiry = 60, arbiter.OnExpiry{Outcome: "verdict:approve"}
			grouped, errs := d.StoreGroup(ctx, []string{acct.ID, acct.ID}, in)
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			for _, g := range grouped {
				check("grouped", mustFind(t, d, acct.ID, g.ID), 0.9, 60, "verdict:approve")
			}
		}
	})
}

// TestTaskService_CreateTask_PolicyNotifyAndReview: a policy's notify
// targets and review requirement are kept with it; a create without them
// takes the policy's, one with them keeps its own, and a change of the
// policy leaves the tasks created before alone.
func TestTaskService_CreateTask_PolicyNotifyAndReview(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		put := func(p arbiter.Policy) {
			t.Helper()
			if _, err := d.PutPolicy(ctx, acct.ID, p, arbiter.Actor{}); err != nil {
				t.Fatal(err)
			}
		}
		rule := arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: arbiter.ConsensusQuorum, Quorum: 2,
			Veto: []string{"reject"}, ExcludeRequester: true, Tiebreak: arbiter.TiebreakAdmin}
		put(arbiter.Policy{TaskType: "refund", Notify: []string{"slack:#refunds-eu", "slack:C0VIP0001"}, Review: &rule})
		put(arbiter.Policy{TaskType: "default", Notify: []string{"slack:#general"}})
		if got, err := d.FindPolicy(ctx, acct.ID, "refund"); err != nil || strings.Join(got.Notify, ",") != "slack:#refunds-eu,slack:C0VIP0001" ||
			got.Review == nil || got.Review.Describe() != rule.Describe() {
			t.Fatalf("found %+v, %v; want the notify and requirement put", got, err)
		}
		const refund = `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund","requested_by":"cfo@example.com"`
		// check asserts the task's stored notify list and requirement.
		check := func(name, id, notify, review string) {
			t.Helper()
			rows, err := d.Rows(ctx, `SELECT notify FROM tasks WHERE id = ?`, id)
			if err != nil || len(rows) != 1 {
				t.Fatalf("%s: %v %v", name, rows, err)
			}
			got := rows[0][0]
			if b, ok := got.([]byte); ok {
				got = string(b)
			}
			task := mustFind(t, d, acct.ID, id)
			gotReview := ""
			if task.Review != nil {
				gotReview = task.Review.Describe() + " by " + task.Review.RequestedBy
			}
			if got != notify || gotReview != review {
				t.Errorf("%s: notify %q, review %q; want %q, %q", name, got, gotReview, notify, review)
			}
		}
		const policyReview = "3 reviews, quorum 2, veto reject, requester excluded, tiebreak role:admin by cfo@example.com"
		taken, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, refund+`}`))
		if err != nil {
			t.Fatal(err)
		}
		check("without the fields", taken.ID, "slack:#refunds-eu,slack:C0VIP0001", policyReview)
		own, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, refund+`,"notify":["slack:#mine"],"reviews_required":2}`))
		if err != nil {
			t.Fatal(err)
		}
		check("with the fields", own.ID, "slack:#mine", "2 reviews, unanimous by cfo@example.com")
		other, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, `{"prompt":"p","allowed_verdicts":["yes"],"task_type":"other"}`))
		if err != nil {
			t.Fatal(err)
		}
		check("another type takes the default policy's", other.ID, "slack:#general", "")
		batch, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{parsedCreate(t, refund+`}`),
			parsedCreate(t, `{"prompt":"p","allowed_verdicts":["yes"],"task_type":"refund","requested_by":"cfo@example.com"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if batch[0].Err != nil || arbiter.ErrorField(batch[1].Err) != "veto" {
			t.Fatalf("batch = %+v", batch)
		}
		check("batch item 0", batch[0].Task.ID, "slack:#refunds-eu,slack:C0VIP0001", policyReview)
		_, err = d.CreateTask(ctx, acct.ID, parsedCreate(t, `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund"}`))
		if arbiter.ErrorField(err) != "requested_by" {
			t.Errorf("a create the policy cannot exclude a requester of: %v, want EINVALID naming requested_by", err)
		}

		// A policy change leaves the tasks already created alone.
		put(arbiter.Policy{TaskType: "refund", Notify: []string{"slack:#later"}})
		check("after the change", taken.ID, "slack:#refunds-eu,slack:C0VIP0001", policyReview)
		changed, err := d.CreateTask(ctx, acct.ID, parsedCreate(t, refund+`}`))
		if err != nil {
			t.Fatal(err)
		}
		check("created after the change", changed.ID, "slack:#later", "1 review, any by cfo@example.com")
	})
}

// A worker that claims many tasks of one account at once asks the store
// for the account's policies once: the misses of the cache that come while
// a read is in flight share it, and each gets the policy.
func TestAgentPolicy_ConcurrentMissesShareOneRead(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		if _, err := d.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ptr(0.95)}, arbiter.Actor{}); err != nil {
			t.Fatal(err)
		}
		const calls = 20
		var mu sync.Mutex
		started, joined := 0, 0
		arrived, release := make(chan struct{}, 2*calls), make(chan struct{})
		restore := db.OnPolicyReads(func(accountID string) {
			if accountID != acct.ID {
				return
			}
			mu.Lock()
			started++
			mu.Unlock()
			arrived <- struct{}{}
			<-release // the read stays in flight until every call has come
		}, func(accountID string) {
			if accountID != acct.ID {
				return
			}
			mu.Lock()
			joined++
			mu.Unlock()
			arrived <- struct{}{}
		})
		defer restore()
		errs := make(chan error, calls)
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				p, err := d.AgentPolicy(ctx, acct.ID, "refund")
				if err == nil && (p == nil || p.ConfidenceThreshold == nil || *p.ConfidenceThreshold != 0.95) {
					err = fmt.Errorf("the policy read is %+v", p)
				}
				errs <- err
			})
		}
		for range calls {
			<-arrived
		}
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if started != 1 || joined != calls-1 {
			t.Errorf("%d calls started %d reads and joined %d, want 1 read shared by all", calls, started, joined)
		}
	})
}
