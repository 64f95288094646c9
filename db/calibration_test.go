package db_test

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestCalibrationService_AuditRate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		if rate, err := d.AuditRate(ctx, acct.ID); err != nil || rate != 0 {
			t.Fatalf("a new account's rate = %v, %v; want 0", rate, err)
		}
		if err := d.SetAuditRate(ctx, acct.ID, 0.05); err != nil {
			t.Fatal(err)
		}
		if rate, _ := d.AuditRate(ctx, acct.ID); rate != 0.05 {
			t.Errorf("rate = %v after setting 0.05", rate)
		}
		for _, bad := range []float64{-0.01, 1.01, math.NaN()} {
			wantCode(t, d.SetAuditRate(ctx, acct.ID, bad), arbiter.EINVALID)
		}
		if rate, _ := d.AuditRate(ctx, acct.ID); rate != 0.05 {
			t.Errorf("a refused rate changed it to %v", rate)
		}
		wantCode(t, d.SetAuditRate(ctx, "acct_nobody", 0.5), arbiter.ENOTFOUND)
		_, err := d.AuditRate(ctx, "acct_nobody")
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}

// completeAll claims the account's pending tasks and completes each as the
// agent with verdict at confidence.
func completeAll(t *testing.T, d *db.DB, verdict string, confidence float64) {
	t.Helper()
	for {
		claimed, err := d.ClaimTasks(ctx, "w", 50, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) == 0 {
			return
		}
		for _, c := range claimed {
			if err := d.FinishAgentAttempt(ctx, "w", c.ID, decided(verdict, confidence)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestQueueService_ChoosesAgentCompletionsForAudit(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		if err := d.SetAuditRate(ctx, acct.ID, 0.5); err != nil {
			t.Fatal(err)
		}
		// Tasks at the account's rate, one at a time and in a batch, and
		// tasks with their own rate.
		own := func(rate float64) arbiter.TaskCreate {
			in := taskCreate("own rate")
			in.AuditRate = &rate
			return in
		}
		var creates []arbiter.TaskCreate
		for range 30 {
			creates = append(creates, taskCreate("account's rate"))
		}
		creates = append(creates, own(1), own(1), own(0), own(0))
		want := map[string]float64{} // id → the rate that applies
		for i, in := range creates {
			var task *arbiter.Task
			var err error
			if i%2 == 0 {
				task, err = d.CreateTask(ctx, acct.ID, in)
			} else {
				var out []arbiter.TaskCreated
				out, err = d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{in, taskCreate("batch")})
				if err == nil {
					task = out[0].Task
					want[out[1].Task.ID] = 0.5
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			rate := 0.5
			if in.AuditRate != nil {
				rate = *in.AuditRate
			}
			want[task.ID] = rate
		}
		if d.Dialect() == db.Postgres {
			tasks, errs := d.StoreGroupOf(ctx, []string{acct.ID, acct.ID}, []arbiter.TaskCreate{own(1), taskCreate("grouped")})
			for i, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
				want[tasks[i].ID] = []float64{1, 0.5}[i]
			}
		}
		// The account's rate changes after the creates: the agent's
		// completion samples at the rate of that moment.
		if err := d.SetAuditRate(ctx, acct.ID, 0.25); err != nil {
			t.Fatal(err)
		}
		for id, rate := range want {
			if rate == 0.5 {
				want[id] = 0.25
			}
		}
		completeAll(t, d, "approve", 0.95)

		chosen := 0
		for id, rate := range want {
			task, err := d.FindTaskByID(ctx, acct.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != arbiter.StatusCompleted || *task.FinalTier != arbiter.TierAgent || *task.FinalVerdict != "approve" {
				t.Errorf("%s: %s, not completed by the agent", id, task.Status)
			}
			if task.AuditRate == nil || *task.AuditRate != rate {
				t.Errorf("%s: sampled at %v, want %v", id, task.AuditRate, rate)
			}
			if waiting := task.AuditState == arbiter.AuditStateWaiting; waiting != arbiter.ChosenForAudit(id, rate) {
				t.Errorf("%s: audit state %q at rate %v, but ChosenForAudit says %v", id, task.AuditState, rate, !waiting)
			} else if waiting {
				chosen++
			}
		}
		queue, total, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if total != chosen || len(queue) != chosen || chosen < 2 {
			t.Fatalf("queue holds %d (total %d), want the %d audits", len(queue), total, chosen)
		}
		for _, q := range queue {
			if !q.AuditWaiting() {
				t.Errorf("%s is in the queue but not an audit: %+v", q.ID, q)
			}
		}
		if n, _ := d.CountHumanQueue(ctx, acct.ID, ""); n != chosen {
			t.Errorf("CountHumanQueue = %d, want %d", n, chosen)
		}
	})
}

func TestQueueService_NoAuditBelowTheThresholdOrWithoutARate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		one := 1.0
		in := taskCreate("unsure")
		in.AuditRate = &one
		low, _ := d.CreateTask(ctx, acct.ID, in)
		plain, _ := d.CreateTask(ctx, acct.ID, taskCreate("no rate"))
		claimed, _ := d.ClaimTasks(ctx, "w", 10, time.Minute)
		for _, c := range claimed {
			step := decided("approve", 0.95)
			if c.ID == low.ID {
				step = decided("approve", 0.5)
				step.Next = arbiter.StatusHumanNeeded
			}
			if err := d.FinishAgentAttempt(ctx, "w", c.ID, step); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{low.ID, plain.ID} {
			task, _ := d.FindTaskByID(ctx, acct.ID, id)
			if task.AuditState != "" {
				t.Errorf("%s (%s) has audit state %q", id, task.Status, task.AuditState)
			}
		}
	})
}

// finalFields are the fields of a task an audit must leave alone.
type finalFields struct {
	Status, Verdict, Tier string
	Confidence            float64
	CompletedAt           arbiter.Timestamp
}

func finalOf(t *arbiter.Task) finalFields {
	return finalFields{t.Status, *t.FinalVerdict, *t.FinalTier, *t.FinalConfidence, *t.CompletedAt}
}

func TestQueueService_AuditDecisionLeavesTheFinalFields(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		other := newAccount(t, d, "b@example.com")
		one := 1.0
		in := taskCreate("audit me")
		in.AuditRate = &one
		in.TaskType, in.Source = "refund", "bot"
		task, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		completeAll(t, d, "approve", 0.93)
		before, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if !before.AuditWaiting() {
			t.Fatalf("not waiting for its audit: %+v", before)
		}
		place, _ := d.FindQueuePlace(ctx, acct.ID, task.ID, "", arbiter.QueueView{})
		if place.Position != 1 || place.Total != 1 {
			t.Errorf("queue place %+v", place)
		}
		c.Add(time.Hour)

		// Another account cannot see it; a verdict outside the set changes nothing.
		_, err = d.DecideTask(ctx, other.ID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "x@example.com"})
		wantCode(t, err, arbiter.ENOTFOUND)
		_, err = d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "maybe", Reviewer: "r@example.com"})
		wantCode(t, err, arbiter.EINVALID)

		answered, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "reject", Rationale: "Not covered.", Reviewer: "r@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		for name, got := range map[string]*arbiter.Task{"answer": answered, "stored": after} {
			if finalOf(got) != finalOf(before) {
				t.Errorf("%s: final fields %+v, want %+v unchanged", name, finalOf(got), finalOf(before))
			}
			if got.AuditState != arbiter.AuditStateDone || got.AuditWaiting() {
				t.Errorf("%s: audit state %q", name, got.AuditState)
			}
			last := got.Attempts[len(got.Attempts)-1]
			if len(got.Attempts) != 2 || !last.Audit || last.Tier != arbiter.TierHuman || *last.Verdict != "reject" ||
				*last.Reviewer != "r@example.com" || got.Attempts[0].Audit {
				t.Errorf("%s: attempts %+v", name, got.Attempts)
			}
			if got.DecidedBy() != "the agent" {
				t.Errorf("%s: decided by %q", name, got.DecidedBy())
			}
		}
		if n, _ := d.CountHumanQueue(ctx, acct.ID, ""); n != 0 {
			t.Errorf("the queue still holds %d", n)
		}
		// A second answer is refused, naming the first reviewer.
		_, err = d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "s@example.com"})
		wantCode(t, err, arbiter.ECONFLICT)
		if again, _ := d.FindTaskByID(ctx, acct.ID, task.ID); len(again.Attempts) != 2 || finalOf(again) != finalOf(before) {
			t.Errorf("the refused answer changed the task: %+v", again)
		}

		// The answer is a labelled pair, flagged as a disagreement.
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TargetErrorRate: 0.02})
		if err != nil {
			t.Fatal(err)
		}
		if len(data.Buckets) != 1 || data.Buckets[0].Bucket != 93 || data.Buckets[0].Audits != 1 ||
			data.Buckets[0].AuditsDisagree != 1 || data.Buckets[0].W != 1 || data.Buckets[0].WCorrect != 0 {
			t.Errorf("buckets %+v", data.Buckets)
		}
		if len(data.Disagreements) != 1 || data.Disagreements[0].TaskID != task.ID || data.Disagreements[0].HumanVerdict != "reject" ||
			data.Disagreements[0].AgentVerdict != "approve" || data.Disagreements[0].Confidence != 0.93 {
			t.Errorf("disagreements %+v", data.Disagreements)
		}
		if len(data.Confusion) != 1 || data.Confusion[0] != (arbiter.VerdictAgreement{AgentVerdict: "approve", HumanVerdict: "reject", N: 1, Weight: 1}) {
			t.Errorf("confusion %+v", data.Confusion)
		}
		// The audit log says it was an audit.
		events, err := d.ListAuditEvents(ctx, acct.ID, 10)
		if err != nil || len(events) == 0 || events[0].Detail != "“reject” on "+task.ID+" (blind audit)" {
			t.Errorf("audit log: %+v, %v", events, err)
		}
		if other, _ := d.CalibrationData(ctx, other.ID, arbiter.CalibrationFilter{}); len(other.Buckets) != 0 {
			t.Errorf("another account sees the pair")
		}
	})
}

func TestQueueService_RoutedDecisionMakesAPair(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("unsure"))
		claimed, _ := d.ClaimTasks(ctx, "w", 1, time.Minute)
		step := decided("approve", 0.57)
		step.Next = arbiter.StatusHumanNeeded
		if err := d.FinishAgentAttempt(ctx, "w", claimed[0].ID, step); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{Model: "test-model"})
		if err != nil {
			t.Fatal(err)
		}
		if len(data.Buckets) != 1 || data.Buckets[0].Bucket != 57 || data.Buckets[0].N != 1 || data.Buckets[0].Audits != 0 ||
			data.Buckets[0].WCorrect != 1 || len(data.Disagreements) != 0 {
			t.Errorf("data %+v", data)
		}
		if data, _ := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{Model: "another"}); len(data.Buckets) != 0 {
			t.Errorf("the model filter lets another model's pair through")
		}
	})
}

// TestCalibrationService_SumsMatchThePureEstimator stores reference data
// sets (set_mixed.csv: routed decisions and audits at two rates, at
// thousandths) and checks that the report from the store's SQL sums,
// certificate included, is the report of the same pairs summed in Go, and
// that the filters select.
func TestCalibrationService_SumsMatchThePureEstimator(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"set_generated.csv", "set_mixed.csv"} {
		t.Run(set, func(t *testing.T) { sumsMatchThePureEstimator(t, set) })
	}
}

func sumsMatchThePureEstimator(t *testing.T, set string) {
	f, err := os.Open(filepath.Join("..", "testdata", "calibration", set))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		var pairs, refunds []arbiter.LabelledPair
		for i, r := range rows[1:] {
			c, _ := strconv.ParseFloat(r[0], 64)
			w, _ := strconv.ParseFloat(r[4], 64)
			p := arbiter.LabelledPair{TaskID: fmt.Sprintf("tsk_%016x", i), AccountID: acct.ID, TaskType: []string{"refund", "moderate"}[i%2],
				Source: "bot", Model: "m1", Confidence: c, AgentVerdict: r[1], HumanVerdict: r[2], Audit: r[3] == "1", Weight: w,
				CreatedAt: arbiter.Timestamp(1_700_000_000_000 + i), LabelledAt: arbiter.Timestamp(1_700_000_100_000 + i)}
			pairs = append(pairs, p)
			if p.TaskType == "refund" {
				refunds = append(refunds, p)
			}
		}
		if err := d.InsertLabelledPairs(ctx, pairs); err != nil {
			t.Fatal(err)
		}
		check := func(t *testing.T, f arbiter.CalibrationFilter, pairs []arbiter.LabelledPair) {
			data, err := d.CalibrationData(ctx, acct.ID, f)
			if err != nil {
				t.Fatal(err)
			}
			got := arbiter.NewCalibrationReport(data, 0.1, arbiter.DefaultCertificationConfidence)
			want := arbiter.Calibrate(arbiter.Bucketize(pairs), arbiter.Evidence(pairs), 0.1, arbiter.DefaultCertificationConfidence)
			if got.N != want.N || got.Audits != want.Audits || got.N == 0 || data.Capped {
				t.Fatalf("n %d audits %d, want %d %d", got.N, got.Audits, want.N, want.Audits)
			}
			if math.Abs(*got.ECE-*want.ECE) > 1e-9 || math.Abs(*got.Brier-*want.Brier) > 1e-9 {
				t.Errorf("ECE %v Brier %v, want %v %v", *got.ECE, *got.Brier, *want.ECE, *want.Brier)
			}
			for i := range want.Bins {
				if got.Bins[i].N != want.Bins[i].N || (want.Bins[i].N > 0 && math.Abs(*got.Bins[i].WilsonUpper-*want.Bins[i].WilsonUpper) > 1e-9) {
					t.Errorf("bin %d: %+v, want %+v", i, got.Bins[i], want.Bins[i])
				}
			}
			if (got.Recommendation.Threshold == nil) != (want.Recommendation.Threshold == nil) ||
				(want.Recommendation.Threshold != nil && *got.Recommendation.Threshold != *want.Recommendation.Threshold) {
				t.Errorf("recommendation %+v, want %+v", got.Recommendation, want.Recommendation)
			}
			// The evidence summed by thousandth in SQL certifies as the
			// pairs summed in Go do.
			gc, wc := got.Certification, want.Certification
			if !nearPtr(gc.Threshold, wc.Threshold) || !nearPtr(gc.Floor, wc.Floor) || !nearPtr(gc.ErrorUpper, wc.ErrorUpper) ||
				gc.N != wc.N || gc.Errors != wc.Errors || gc.Audits != wc.Audits || gc.Routed != wc.Routed || wc.Floor == nil {
				t.Errorf("certificate %+v, want %+v", gc, wc)
			}
			n := 0
			for _, v := range got.Agreement {
				n += v.N
			}
			if n != want.N {
				t.Errorf("the agreement table counts %d pairs, want %d", n, want.N)
			}
		}
		t.Run("all", func(t *testing.T) { check(t, arbiter.CalibrationFilter{TargetErrorRate: 0.1}, pairs) })
		t.Run("task type", func(t *testing.T) { check(t, arbiter.CalibrationFilter{TaskType: "refund"}, refunds) })
		after, before := arbiter.Timestamp(1_700_000_000_099), arbiter.Timestamp(1_700_000_000_500)
		t.Run("window", func(t *testing.T) {
			check(t, arbiter.CalibrationFilter{CreatedAfter: &after, CreatedBefore: &before}, pairs[100:500])
		})
		if data, _ := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{Source: "other"}); len(data.Buckets) != 0 {
			t.Error("the source filter lets pairs through")
		}
	})
}

func TestCalibrationService_ReadsTheNewestPairsUpToItsCap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{MaxCalibrationPairs: 100}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		var pairs []arbiter.LabelledPair
		for i := range 150 {
			human := "approve"
			if i < 50 { // the oldest fifty disagree
				human = "reject"
			}
			pairs = append(pairs, arbiter.LabelledPair{TaskID: fmt.Sprintf("tsk_%016x", i), AccountID: acct.ID, TaskType: "t",
				Confidence: 0.9, AgentVerdict: "approve", HumanVerdict: human, Weight: 1, CreatedAt: arbiter.Timestamp(1_000_000 + i)})
		}
		if err := d.InsertLabelledPairs(ctx, pairs); err != nil {
			t.Fatal(err)
		}
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if !data.Capped || len(data.Buckets) != 1 || data.Buckets[0].N != 100 || data.Buckets[0].WCorrect != 100 {
			t.Errorf("capped %v, buckets %+v: want the newest 100, all agreeing", data.Capped, data.Buckets)
		}
		after := arbiter.Timestamp(1_000_000 + 99)
		if data, _ := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{CreatedAfter: &after}); data.Capped || data.Buckets[0].N != 50 {
			t.Errorf("50 pairs: capped %v, %+v", data.Capped, data.Buckets)
		}
	})
}

func TestCalibrationService_SeedDemoHistory(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		if data, _ := d.CalibrationData(ctx, arbiter.DemoAccountID, arbiter.CalibrationFilter{}); len(data.Buckets) != 0 {
			t.Fatalf("the demo has a history before it is seeded")
		}
		for range 2 {
			if err := d.SeedDemoHistory(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Another process's store seeds nothing more.
		again := dbtest.OpenURL(t, d.URLForTest(), db.Options{})
		if err := again.SeedDemoHistory(ctx); err != nil {
			t.Fatal(err)
		}
		data, err := d.CalibrationData(ctx, arbiter.DemoAccountID, arbiter.CalibrationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		r := arbiter.NewCalibrationReport(data, arbiter.DefaultTargetErrorRate, arbiter.DefaultCertificationConfidence)
		if r.N != 2759 || r.Audits == 0 || r.AuditsDisagree == 0 || r.Recommendation.Threshold == nil || len(r.Agreement) < 4 {
			t.Errorf("the demo's report: n %d, audits %d, recommendation %+v", r.N, r.Audits, r.Recommendation)
		}
	})
}

// TestFinishGroup_ChoosesCompletionsForAudit records completions as one
// grouped statement (Postgres): each is chosen for audit as a finish alone
// would choose it, at its own rate or its account's.
func TestFinishGroup_ChoosesCompletionsForAudit(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	acct := newAccount(t, d, "a@example.com")
	if err := d.SetAuditRate(ctx, acct.ID, 0.5); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for i := range 40 {
		in := taskCreate("grouped")
		rate := 0.5
		if i%4 == 0 {
			rate = 1
			in.AuditRate = &rate
		}
		task, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		want[task.ID] = rate
	}
	claimed, err := d.ClaimTasks(ctx, "w", 40, time.Minute)
	if err != nil || len(claimed) != 40 {
		t.Fatalf("claimed %d (%v)", len(claimed), err)
	}
	var finishes []db.Finish
	for i, c := range claimed {
		step := decided("approve", 0.95)
		if i == 0 { // one that is not completed is never audited
			step = decided("approve", 0.3)
			step.Next = arbiter.StatusHumanNeeded
			want[c.ID] = -1
		}
		finishes = append(finishes, db.Finish{"w", c.ID, step})
	}
	before := d.GroupedFinishes()
	for _, err := range d.FinishGroup(ctx, finishes) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if d.GroupedFinishes() == before {
		t.Fatal("the finishes were not grouped")
	}
	chosen := 0
	for id, rate := range want {
		task, _ := d.FindTaskByID(ctx, acct.ID, id)
		waiting := task.AuditState == arbiter.AuditStateWaiting
		switch {
		case rate < 0:
			if task.AuditState != "" {
				t.Errorf("%s went to a human but has audit state %q", id, task.AuditState)
			}
		case task.AuditRate == nil || *task.AuditRate != rate:
			t.Errorf("%s: sampled at %v, want %v", id, task.AuditRate, rate)
		case waiting != arbiter.ChosenForAudit(id, rate):
			t.Errorf("%s: audit state %q at rate %v, ChosenForAudit disagrees", id, task.AuditState, rate)
		}
		if waiting {
			chosen++
		}
	}
	if chosen < 10 {
		t.Errorf("only %d of 39 completions were chosen", chosen)
	}
}

// TestQueueService_AuditDisagreementIsAWebhookEvent: an audit that
// disagrees queues task.audit_disagreed, in its transaction, to the
// endpoints that want it; one that agrees queues nothing.
func TestQueueService_AuditDisagreementIsAWebhookEvent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		e, err := d.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks",
			EventTypes: []string{arbiter.EventTaskAuditDisagreed}}, false, owner)
		if err != nil {
			t.Fatal(err)
		}
		one := 1.0
		var ids []string
		for range 2 {
			in := taskCreate("audit me")
			in.AuditRate = &one
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		completeAll(t, d, "approve", 0.95)
		for i, verdict := range []string{"approve", "reject"} {
			if _, err := d.DecideTask(ctx, acct.ID, ids[i], arbiter.HumanDecision{Verdict: verdict, Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := d.ListWebhookMessages(ctx, acct.ID, e.ID, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].EventType != arbiter.EventTaskAuditDisagreed || msgs[0].TaskID != ids[1] {
			t.Errorf("messages %+v, want one task.audit_disagreed for %s", msgs, ids[1])
		}
	})
}

// TestCalibrationService_CertifiesEachStratum checks the strata the store
// sums against the pure certificate of each stratum's own pairs: one task
// type whose audits certify a threshold, one whose audits do not, and the
// models and verifier versions across them.
func TestCalibrationService_CertifiesEachStratum(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		by := map[[2]string][]arbiter.LabelledPair{}
		var pairs []arbiter.LabelledPair
		add := func(taskType, model, version string, confidence float64, wrong bool, audit bool) {
			i := len(pairs)
			human, weight := "approve", 1.0
			if wrong {
				human = "reject"
			}
			if audit {
				weight = 4
			}
			p := arbiter.LabelledPair{TaskID: fmt.Sprintf("tsk_%016x", i), AccountID: acct.ID, TaskType: taskType, Source: "bot",
				Model: model, Version: version, Confidence: confidence, AgentVerdict: "approve", HumanVerdict: human, Audit: audit, Weight: weight,
				CreatedAt: arbiter.Timestamp(1_700_000_000_000 + i), LabelledAt: arbiter.Timestamp(1_700_000_100_000 + i)}
			pairs = append(pairs, p)
			by[[2]string{arbiter.StratumTaskType, taskType}] = append(by[[2]string{arbiter.StratumTaskType, taskType}], p)
			by[[2]string{arbiter.StratumModel, model}] = append(by[[2]string{arbiter.StratumModel, model}], p)
			by[[2]string{arbiter.StratumVersion, version}] = append(by[[2]string{arbiter.StratumVersion, version}], p)
		}
		for i := range 300 { // refunds: 300 audits at 0.95–0.99 with one error, routed pairs below 0.9
			add("refund", []string{"m1", "m2"}[i%2], []string{"v1", "v2", "v2"}[i%3], 0.95+float64(i%5)/100, i == 0, true)
		}
		for i := range 40 {
			add("refund", "m1", "v1", 0.5+float64(i%40)/100, i%4 == 0, false)
		}
		for i := range 100 { // moderation: one audit in ten wrong
			add("moderate", "m2", "", 0.9+float64(i%10)/100, i%10 == 0, true)
		}
		if err := d.InsertLabelledPairs(ctx, pairs); err != nil {
			t.Fatal(err)
		}
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TargetErrorRate: 0.02, Confidence: 0.95})
		if err != nil {
			t.Fatal(err)
		}
		report := arbiter.NewCalibrationReport(data, 0.02, 0.95)
		if len(report.Strata) != 7 {
			t.Fatalf("strata: %+v, want refund, moderate, m1, m2, v1, v2 and no version", report.Strata)
		}
		certified := 0
		for _, s := range report.Strata {
			own := by[[2]string{s.Dimension, s.Value}]
			want := arbiter.Certify(arbiter.Evidence(own), 0.02, 0.95)
			if s.N != len(own) || !nearPtr(s.Certification.Threshold, want.Threshold) || s.Certification.N != want.N || s.Certification.Errors != want.Errors {
				t.Errorf("%s %s: n %d, certificate %v on %d audits; want n %d, %v on %d", s.Dimension, s.Value, s.N,
					s.Certification.Threshold, s.Certification.N, len(own), want.Threshold, want.N)
			}
			if s.Certification.Threshold != nil {
				certified++
			}
		}
		refund := report.Strata[slices.IndexFunc(report.Strata, func(s arbiter.CalibrationStratum) bool { return s.Value == "refund" })]
		moderate := report.Strata[slices.IndexFunc(report.Strata, func(s arbiter.CalibrationStratum) bool { return s.Value == "moderate" })]
		if refund.Certification.Threshold == nil || moderate.Certification.Threshold != nil || certified == len(report.Strata) {
			t.Errorf("refunds should certify and moderation not: refund %+v, moderate %+v", refund.Certification, moderate.Certification)
		}
	})
}

func nearPtr(got, want *float64) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return math.Abs(*got-*want) < 1e-9
}

// TestCalibrationService_CountsRecentLabels counts the answers labelled in
// the last 30 days among the pairs the filter selects, audits and routed
// decisions alike: older labels, other task types and other accounts are
// left out.
func TestCalibrationService_CountsRecentLabels(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		other := newAccount(t, d, "b@example.com")
		now := arbiter.TimestampOf(c.Now())
		day := arbiter.Timestamp(86_400_000)
		var pairs []arbiter.LabelledPair
		add := func(accountID, taskType string, audit bool, labelledAt arbiter.Timestamp) {
			pairs = append(pairs, arbiter.LabelledPair{TaskID: fmt.Sprintf("tsk_%016x", len(pairs)), AccountID: accountID, TaskType: taskType,
				Confidence: 0.95, AgentVerdict: "approve", HumanVerdict: "approve", Audit: audit, Weight: 1,
				CreatedAt: labelledAt - 1000, LabelledAt: labelledAt})
		}
		for i := range 5 {
			add(acct.ID, "refund", true, now-arbiter.Timestamp(i)*day) // recent
		}
		add(acct.ID, "refund", true, now-31*day) // too old
		add(acct.ID, "refund", false, now-day)   // routed
		add(acct.ID, "moderate", true, now-day)  // another type
		add(other.ID, "refund", true, now-day)   // another account
		if err := d.InsertLabelledPairs(ctx, pairs); err != nil {
			t.Fatal(err)
		}
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TaskType: "refund", TargetErrorRate: 0.02})
		if err != nil {
			t.Fatal(err)
		}
		if data.RecentLabels != 6 {
			t.Errorf("RecentLabels = %d, want 6", data.RecentLabels)
		}
	})
}
