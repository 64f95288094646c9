package db_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// The gold tests' verdicts: distinctive strings, so that a page or a
// payload that shows the gold one more often than the other gives it away.
const (
	goldKestrel = "verdict-kestrel" // the gold verdict
	goldPlover  = "verdict-plover"  // the other
)

// goldCreate returns a create of a gold task whose gold verdict is
// goldKestrel, with a callback so that its events are queued.
func goldCreate(prompt string) arbiter.TaskCreate {
	in := taskCreate(prompt)
	in.AllowedVerdicts = []string{goldKestrel, goldPlover}
	in.GoldVerdict = goldKestrel
	in.CallbackURL = "https://workflow.example.com/resume" // no deliverer runs here
	return in
}

// goldTeam returns an account with its owner and one reviewer.
func goldTeam(t *testing.T, d *db.DB) (acct *arbiter.Account, owner, reviewer *arbiter.Person) {
	t.Helper()
	acct = newAccount(t, d, "owner@example.com")
	owner = personOf(t, d, "owner@example.com")
	token := invite(t, d, acct.ID, "ann@example.com", arbiter.RoleReviewer, owner)
	reviewer = personOf(t, d, "ann@example.com")
	if _, err := d.AcceptInvitation(ctx, token, reviewer.ID, arbiter.Client{}); err != nil {
		t.Fatal(err)
	}
	return acct, owner, reviewer
}

// assertNoGold fails unless text neither names gold nor shows the gold
// verdict more often than the other one.
func assertNoGold(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(strings.ToLower(text), "gold") {
		t.Errorf("%s mentions gold:\n%s", what, text)
	}
	if k, p := strings.Count(text, goldKestrel), strings.Count(text, goldPlover); k != p {
		t.Errorf("%s shows the gold verdict %d times and the other %d:\n%s", what, k, p, text)
	}
}

func TestGold_CreateHandsTheTaskToPeopleAndKeepsItsVerdictApart(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, _ := goldTeam(t, d)
		single, err := d.CreateTask(ctx, acct.ID, goldCreate("refund alone"))
		if err != nil {
			t.Fatal(err)
		}
		batch, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{goldCreate("refund in a batch"), taskCreate("plain")})
		if err != nil || batch[0].Err != nil || batch[1].Err != nil {
			t.Fatalf("batch = %+v, %v", batch, err)
		}
		golds := []string{single.ID, batch[0].Task.ID}
		for _, id := range golds {
			got, err := d.FindTaskByID(ctx, acct.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != arbiter.StatusHumanNeeded || len(got.Attempts) != 0 {
				t.Errorf("gold task %s = %s with %d attempts, want human_needed at once, no agent attempt", id, got.Status, len(got.Attempts))
			}
			if got.GoldVerdict != nil {
				t.Errorf("FindTaskByID filled the gold verdict of %s; only GoldVerdicts does", id)
			}
			types, payloads, err := d.TaskMessages(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(types) != 1 || types[0] != arbiter.EventTaskHumanNeeded {
				t.Fatalf("gold task %s queued %v, want one task.human_needed", id, types)
			}
			assertNoGold(t, "the task.human_needed payload", payloads[0])
		}
		// The agent never takes a gold task: only the plain one is claimed.
		claimed, err := d.ClaimTasks(ctx, "w", 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != batch[1].Task.ID {
			t.Fatalf("claimed %+v, %v; want the plain task only", claimed, err)
		}
		page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			if task.GoldVerdict != nil {
				t.Errorf("ListTasks filled the gold verdict of %s", task.ID)
			}
		}
		verdicts, err := d.GoldVerdicts(ctx, acct.ID, append(golds, batch[1].Task.ID))
		if err != nil {
			t.Fatal(err)
		}
		if len(verdicts) != 2 || verdicts[golds[0]] != goldKestrel || verdicts[golds[1]] != goldKestrel {
			t.Errorf("GoldVerdicts = %v, want both gold tasks' %q", verdicts, goldKestrel)
		}
		other := newAccount(t, d, "other@example.com")
		if foreign, err := d.GoldVerdicts(ctx, other.ID, golds); err != nil || len(foreign) != 0 {
			t.Errorf("another account's GoldVerdicts = %v, %v; want none", foreign, err)
		}
	})
}

func TestGold_AnswerCompletesWithTheGoldVerdictAndCountsOnlyTowardAccuracy(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, ann := goldTeam(t, d)
		wrong, err := d.CreateTask(ctx, acct.ID, goldCreate("answered wrong"))
		if err != nil {
			t.Fatal(err)
		}
		right, err := d.CreateTask(ctx, acct.ID, goldCreate("answered right"))
		if err != nil {
			t.Fatal(err)
		}
		for id, verdict := range map[string]string{wrong.ID: goldPlover, right.ID: goldKestrel} {
			decided, err := d.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: verdict, Reviewer: ann.Email, ReviewerID: ann.ID})
			if err != nil {
				t.Fatal(err)
			}
			if decided.FinalVerdict == nil || *decided.FinalVerdict != goldKestrel {
				t.Errorf("the decision answered final verdict %v, want the gold %q", decided.FinalVerdict, goldKestrel)
			}
		}
		got, err := d.FindTaskByID(ctx, acct.ID, wrong.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != arbiter.StatusCompleted || *got.FinalVerdict != goldKestrel || *got.FinalTier != arbiter.TierHuman {
			t.Errorf("the gold task = %s %v %v, want completed with %q by a human", got.Status, *got.FinalVerdict, *got.FinalTier, goldKestrel)
		}
		if n := len(got.Attempts); n != 1 || *got.Attempts[0].Verdict != goldPlover || *got.Attempts[0].Reviewer != ann.Email {
			t.Errorf("attempts = %+v, want ann's answer %q", got.Attempts, goldPlover)
		}
		if v := got.OutcomeForReviewers(); v == nil || *v != goldPlover {
			t.Errorf("reviewers see the outcome %v, want ann's own answer", v)
		}
		// The completed event carries the caller's final verdict, never
		// the gold field.
		types, payloads, err := d.TaskMessages(ctx, wrong.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(types) != 2 || types[1] != arbiter.EventTaskCompleted {
			t.Fatalf("messages = %v, want human_needed then completed", types)
		}
		if strings.Contains(payloads[1], "gold") {
			t.Errorf("the completed payload names gold: %s", payloads[1])
		}
		// Not calibration, not consensus: accuracy only.
		if n, err := d.Count(ctx, `SELECT count(*) FROM labelled_pairs WHERE account_id = ?`, acct.ID); err != nil || n != 0 {
			t.Errorf("labelled pairs = %d, %v; want none from gold tasks", n, err)
		}
		since := arbiter.TimestampOf(time.Now().Add(-time.Hour))
		if tasks, err := d.ListAgreementTasks(ctx, acct.ID, since); err != nil || len(tasks) != 0 {
			t.Errorf("agreement tasks = %+v, %v; want none from gold tasks", tasks, err)
		}
		answers, err := d.ListGoldAnswers(ctx, acct.ID, since)
		if err != nil {
			t.Fatal(err)
		}
		report := arbiter.TeamAgreement(nil)
		report.AddGold(answers)
		if len(report.Reviewers) != 1 {
			t.Fatalf("report reviewers = %+v, want ann", report.Reviewers)
		}
		line := report.Reviewers[0]
		if line.Email != ann.Email || line.GoldAnswered != 2 || line.GoldCorrect != 1 || line.GoldAccuracy == nil || *line.GoldAccuracy != 0.5 ||
			line.Votes != 0 || line.WithConsensus != nil || report.Pairs != 0 || report.Tasks != 0 {
			t.Errorf("ann's line = %+v (report %+v), want 1 of 2 gold right and no votes", line, report)
		}
	})
}

func TestGold_TheDeskServesGoldTasksAtTheAccountsRate(t *testing.T) {
	var draws []float64
	draw := func() float64 {
		if len(draws) == 0 {
			panic("the test ran out of draws")
		}
		x := draws[0]
		draws = draws[1:]
		return x
	}
	dbtest.Each(t, db.Options{GoldDraw: draw}, func(t *testing.T, d *db.DB) {
		acct, owner, ann := goldTeam(t, d)
		if err := d.SetGoldRate(ctx, acct.ID, 0.5, arbiter.Actor{PersonID: owner.ID}); err != nil {
			t.Fatal(err)
		}
		if err := d.SetGoldRate(ctx, acct.ID, 0.5, arbiter.Actor{PersonID: ann.ID}); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("a reviewer set the gold rate: %v", err)
		}
		wantCode(t, d.SetGoldRate(ctx, acct.ID, 1.5, arbiter.Actor{PersonID: owner.ID}), arbiter.EINVALID)
		if a, err := d.FindAccountByID(ctx, acct.ID); err != nil || a.GoldRate != 0.5 {
			t.Fatalf("gold rate = %v, %v; want 0.5", a.GoldRate, err)
		}
		// Two plain tasks, older, then two gold ones.
		var plain []string
		for _, prompt := range []string{"plain 1", "plain 2"} {
			task, err := d.CreateTask(ctx, acct.ID, taskCreate(prompt))
			if err != nil {
				t.Fatal(err)
			}
			plain = append(plain, task.ID)
		}
		if claimed, err := d.ClaimTasks(ctx, "w", 10, time.Minute); err != nil || len(claimed) != 2 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		for _, id := range plain {
			if err := d.FinishAgentAttempt(ctx, "w", id, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
				t.Fatal(err)
			}
		}
		var gold []string
		for _, prompt := range []string{"known 1", "known 2"} {
			task, err := d.CreateTask(ctx, acct.ID, goldCreate(prompt))
			if err != nil {
				t.Fatal(err)
			}
			gold = append(gold, task.ID)
		}
		// Above the rate: the queue first; below: a gold task first; gold
		// first with none left: the queue; nothing left: nothing, whatever
		// the draw.
		draws = []float64{0.7, 0.2, 0.49, 0.2, 0.2}
		served := map[string]bool{}
		for i, want := range [][]string{plain, gold, gold, plain, nil} {
			r, err := d.NextTask(ctx, acct.ID, ann.ID, "", arbiter.QueueView{})
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				if want != nil {
					t.Fatalf("ask %d served nothing, want one of %v", i+1, want)
				}
				break
			}
			if !slices.Contains(want, r.TaskID) || served[r.TaskID] {
				t.Fatalf("ask %d served %q, want a new one of %v", i+1, r.TaskID, want)
			}
			served[r.TaskID] = true
			verdict := "approve"
			if slices.Contains(gold, r.TaskID) {
				verdict = goldPlover
			}
			if _, err := d.DecideTask(ctx, acct.ID, r.TaskID, arbiter.HumanDecision{Verdict: verdict, Reviewer: ann.Email, ReviewerID: ann.ID}); err != nil {
				t.Fatal(err)
			}
		}
		if len(draws) != 0 {
			t.Errorf("%d draws left; each ask draws once", len(draws))
		}
	})
}
