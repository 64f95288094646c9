package db_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// votingTask returns a create asking for the requirement.
func votingTask(r arbiter.ReviewRequirement) arbiter.TaskCreate {
	in := taskCreate("refund 900 EUR?")
	in.Review = &r
	in.CallbackURL = "https://workflow.example.com/resume" // no deliverer runs here
	return in
}

func TestTaskService_CreateTask_KeepsTheReviewRequirement(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		want := arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: arbiter.ConsensusQuorum, Quorum: 2,
			Veto: []string{"reject"}, ExcludeRequester: true, RequestedBy: "cfo@example.com", Tiebreak: arbiter.TiebreakAdmin}
		created, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{votingTask(want), taskCreate("plain")})
		if err != nil || created[0].Err != nil || created[1].Err != nil {
			t.Fatalf("create = %+v, %v", created, err)
		}
		single, err := d.CreateTask(ctx, acct.ID, votingTask(want))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{created[0].Task.ID, single.ID} {
			got, err := d.FindTaskByID(ctx, acct.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Review == nil || string(arbiter.MarshalRequirement(*got.Review)) != string(arbiter.MarshalRequirement(want)) {
				t.Errorf("task %s review = %+v, want %+v", id, got.Review, want)
			}
		}
		if got, err := d.FindTaskByID(ctx, acct.ID, created[1].Task.ID); err != nil || got.Review != nil {
			t.Errorf("a plain task's review = %+v, %v; want none", got.Review, err)
		}
	})
}

// votingTeam returns an account with its owner and three reviewers (ann,
// bob, cat), and a task asking r waiting for a human.
func votingTeam(t *testing.T, d *db.DB, r arbiter.ReviewRequirement) (acct *arbiter.Account, owner *arbiter.Person, reviewers []*arbiter.Person, task *arbiter.Task) {
	t.Helper()
	acct = newAccount(t, d, "owner@example.com")
	owner = personOf(t, d, "owner@example.com")
	reviewers = addReviewers(t, d, acct.ID, owner, "ann@example.com", "bob@example.com", "cat@example.com")
	task, err := d.CreateTask(ctx, acct.ID, votingTask(r))
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := d.ClaimTasks(ctx, "w", 10, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if err := d.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
		t.Fatal(err)
	}
	return acct, owner, reviewers, task
}

// addReviewers invites each e-mail address to the account as a reviewer,
// by owner, and returns the people who accepted, in order.
func addReviewers(t *testing.T, d *db.DB, accountID string, owner *arbiter.Person, emails ...string) []*arbiter.Person {
	t.Helper()
	var people []*arbiter.Person
	for _, email := range emails {
		token := invite(t, d, accountID, email, arbiter.RoleReviewer, owner)
		p := personOf(t, d, email)
		if _, err := d.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		people = append(people, p)
	}
	return people
}

// voteBy is p's vote with the verdict.
func voteBy(p *arbiter.Person, verdict string) arbiter.HumanDecision {
	return arbiter.HumanDecision{Verdict: verdict, Reviewer: p.Email, ReviewerID: p.ID}
}

// votesCast counts the task's human attempts.
func votesCast(t *testing.T, d *db.DB, accountID, taskID string) (*arbiter.Task, int) {
	t.Helper()
	got, err := d.FindTaskByID(ctx, accountID, taskID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range got.Attempts {
		if a.Tier == arbiter.TierHuman {
			n++
		}
	}
	return got, n
}

var twoVotes = arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous}

func TestConsensus_TwoVotesAtOnceBothCountAndCompleteOnce(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, rs, task := votingTeam(t, d, twoVotes)
		ann, bob, cat := rs[0], rs[1], rs[2]
		// Two reviewers hold the task at once; a third cannot take a slot.
		for _, p := range []*arbiter.Person{ann, bob} {
			r, err := d.ReserveTask(ctx, acct.ID, task.ID, p.ID)
			if err != nil || r == nil || r.PersonID != p.ID {
				t.Fatalf("%s's slot = %+v, %v", p.Email, r, err)
			}
		}
		r, err := d.ReserveTask(ctx, acct.ID, task.ID, cat.ID)
		if err != nil || r == nil || !r.HeldByOther(cat.ID, arbiter.TimestampOf(time.Now())) {
			t.Fatalf("cat's slot = %+v, %v; want held by another", r, err)
		}
		_, err = d.DecideTask(ctx, acct.ID, task.ID, voteBy(cat, "approve"))
		wantCode(t, err, arbiter.ECONFLICT)
		if next, err := d.NextTask(ctx, acct.ID, cat.ID, "", arbiter.QueueView{}); err != nil || next != nil {
			t.Errorf("cat's next task = %+v, %v; want none", next, err)
		}

		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, p := range []*arbiter.Person{ann, bob} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = d.DecideTask(ctx, acct.ID, task.ID, voteBy(p, "approve"))
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("votes = %v, %v; want both taken", errs[0], errs[1])
		}
		got, n := votesCast(t, d, acct.ID, task.ID)
		if n != 2 || got.Status != arbiter.StatusCompleted || got.FinalVerdict == nil || *got.FinalVerdict != "approve" ||
			got.FinalTier == nil || *got.FinalTier != arbiter.TierHuman {
			t.Fatalf("task = %s %v %v with %d votes; want completed approve by humans with 2", got.Status, got.FinalVerdict, got.FinalTier, n)
		}
		_, err = d.DecideTask(ctx, acct.ID, task.ID, voteBy(cat, "reject"))
		wantCode(t, err, arbiter.ECONFLICT)
	})
}

func TestConsensus_OnePersonVotesOnce(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, rs, task := votingTeam(t, d, arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: arbiter.ConsensusUnanimous})
		ann := rs[0]
		// Two tabs vote at the same moment: one vote counts.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = d.DecideTask(ctx, acct.ID, task.ID, voteBy(ann, "approve"))
			}()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("two tabs = %v, %v; want one vote taken, one refused", errs[0], errs[1])
		}
		for _, err := range errs {
			if err != nil {
				wantCode(t, err, arbiter.ECONFLICT)
			}
		}
		// Later, another session: refused too.
		_, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(ann, "reject"))
		wantCode(t, err, arbiter.ECONFLICT)
		if got, n := votesCast(t, d, acct.ID, task.ID); n != 1 || got.Status != arbiter.StatusHumanNeeded {
			t.Errorf("task = %s with %d votes; want waiting with 1", got.Status, n)
		}
		// Having voted, Ann gets no slot of it.
		if r, err := d.ReserveTask(ctx, acct.ID, task.ID, ann.ID); err != nil || r != nil {
			t.Errorf("ann's slot after voting = %+v, %v; want none", r, err)
		}
	})
}

func TestConsensus_AVetoEndsIt(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, rs, task := votingTeam(t, d, arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: arbiter.ConsensusUnanimous, Veto: []string{"reject"}})
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[0], "approve")); err != nil {
			t.Fatal(err)
		}
		// The vote is announced by its count, never its verdict.
		types, payloads, err := d.TaskMessages(ctx, task.ID)
		// Messages written in the same millisecond have no order between
		// them: find the vote's by its type.
		vote := slices.Index(types, arbiter.EventTaskVoteRecorded)
		if err != nil || len(types) != 2 || vote < 0 || !slices.Contains(types, arbiter.EventTaskHumanNeeded) {
			t.Fatalf("messages = %v, %v; want task.human_needed and task.vote_recorded", types, err)
		}
		if strings.Contains(payloads[vote], "approve") || !strings.Contains(payloads[vote], `"votes":1`) || !strings.Contains(payloads[vote], `"reviews_required":3`) {
			t.Errorf("task.vote_recorded = %s; want the count only", payloads[vote])
		}
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[1], "reject")); err != nil {
			t.Fatal(err)
		}
		got, n := votesCast(t, d, acct.ID, task.ID)
		if n != 2 || got.Status != arbiter.StatusCompleted || *got.FinalVerdict != "reject" {
			t.Fatalf("task = %s %v with %d votes; want completed reject with 2", got.Status, got.FinalVerdict, n)
		}
		if types, _, err := d.TaskMessages(ctx, task.ID); err != nil || len(types) != 3 || !slices.Contains(types, arbiter.EventTaskCompleted) {
			t.Errorf("messages = %v, %v; want human_needed, vote_recorded, completed", types, err)
		}
	})
}

func TestConsensus_TiebreakByAnAdmin(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, owner, rs, task := votingTeam(t, d, arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous, Tiebreak: arbiter.TiebreakAdmin})
		for i, v := range []string{"approve", "reject"} {
			if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[i], v)); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := votesCast(t, d, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Fatalf("a split task is %s, want waiting for its tiebreak", got.Status)
		}
		// A reviewer may not break the tie, nor take its slot.
		_, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[2], "approve"))
		wantCode(t, err, arbiter.ECONFLICT)
		if r, err := d.ReserveTask(ctx, acct.ID, task.ID, rs[2].ID); err != nil || r != nil {
			t.Errorf("a reviewer's tiebreak slot = %+v, %v; want none", r, err)
		}
		if r, err := d.ReserveTask(ctx, acct.ID, task.ID, owner.ID); err != nil || r == nil || r.PersonID != owner.ID {
			t.Fatalf("the owner's tiebreak slot = %+v, %v", r, err)
		}
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(owner, "reject")); err != nil {
			t.Fatal(err)
		}
		got, n := votesCast(t, d, acct.ID, task.ID)
		if n != 3 || got.Status != arbiter.StatusCompleted || *got.FinalVerdict != "reject" {
			t.Fatalf("task = %s %v with %d votes; want completed reject with 3", got.Status, got.FinalVerdict, n)
		}
	})
}

func TestConsensus_ASplitWithoutTiebreakWaits(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, owner, rs, task := votingTeam(t, d, twoVotes)
		for i, v := range []string{"approve", "reject"} {
			if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[i], v)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(owner, "approve"))
		wantCode(t, err, arbiter.ECONFLICT)
		if got, n := votesCast(t, d, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded || n != 2 {
			t.Errorf("task = %s with %d votes; want waiting for its deadline with 2", got.Status, n)
		}
	})
}

func TestConsensus_ExpiryWithPartialVotes(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, rs, task := votingTeam(t, d, twoVotes)
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[0], "approve")); err != nil {
			t.Fatal(err)
		}
		if err := d.MoveDeadline(ctx, task.ID, arbiter.TimestampOf(time.Now().Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		// Before the sweep, the late vote is refused as expired.
		_, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[1], "approve"))
		wantCode(t, err, arbiter.ECONFLICT)
		if ids, err := d.ExpireTasks(ctx, 10); err != nil || len(ids) != 1 {
			t.Fatalf("expired = %v, %v", ids, err)
		}
		got, n := votesCast(t, d, acct.ID, task.ID)
		if got.Status != arbiter.StatusExpired || got.FinalVerdict != nil || n != 1 {
			t.Errorf("task = %s %v with %d votes; want expired, no verdict, its vote kept", got.Status, got.FinalVerdict, n)
		}
	})
}

// A person's vote is never overridden by the task's on-expiry verdict:
// ann rejects, nobody else votes, and the deadline expires the task
// instead of approving it, as a task without an outcome would.
func TestConsensus_ExpiryWithAVoteIgnoresTheOnExpiryVerdict(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		rs := addReviewers(t, d, acct.ID, personOf(t, d, "owner@example.com"), "ann@example.com", "bob@example.com")
		in := withOutcome("refund 900 EUR?", arbiter.OnExpiry{Outcome: "verdict:approve"})
		in.Review = &twoVotes
		in.ConfidenceThreshold = 1
		voted, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		in.Prompt = "nobody voted"
		unvoted, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		answeredToHuman(t, d, voted.ID, nil, 0)
		if _, err := d.DecideTask(ctx, acct.ID, voted.ID, voteBy(rs[0], "reject")); err != nil {
			t.Fatal(err)
		}
		past := arbiter.TimestampOf(time.Now().Add(-time.Second))
		for _, id := range []string{voted.ID, unvoted.ID} {
			if err := d.MoveDeadline(ctx, id, past); err != nil {
				t.Fatal(err)
			}
		}
		// Before the sweep, the late voter is told the task expires.
		_, err = d.DecideTask(ctx, acct.ID, voted.ID, voteBy(rs[1], "approve"))
		wantCode(t, err, arbiter.ECONFLICT)
		if msg := arbiter.ErrorMessage(err); !strings.Contains(msg, "expired") || strings.Contains(msg, "approve") {
			t.Errorf("a vote after the deadline, before the sweep: %v; want the task expired", err)
		}
		if ids, err := d.ExpireTasks(ctx, 10); err != nil || len(ids) != 2 {
			t.Fatalf("swept = %v, %v; want both tasks", ids, err)
		}
		got, n := votesCast(t, d, acct.ID, voted.ID)
		if got.Status != arbiter.StatusExpired || got.FinalVerdict != nil || got.FinalTier != nil || n != 1 {
			t.Errorf("voted task = %s %v by %v with %d votes; want expired, no verdict, ann's vote kept",
				got.Status, deref(got.FinalVerdict), deref(got.FinalTier), n)
		}
		if got, _ := votesCast(t, d, acct.ID, unvoted.ID); got.Status != arbiter.StatusCompleted || got.FinalVerdict == nil || *got.FinalVerdict != "approve" {
			t.Errorf("task nobody voted on = %s %v; want its on-expiry verdict approve", got.Status, deref(got.FinalVerdict))
		}
	})
}

func TestConsensus_NextTaskGivesOneSlotPerVoter(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, rs, task := votingTeam(t, d, twoVotes)
		for _, p := range rs[:2] {
			r, err := d.NextTask(ctx, acct.ID, p.ID, "", arbiter.QueueView{})
			if err != nil || r == nil || r.TaskID != task.ID || r.PersonID != p.ID {
				t.Fatalf("%s's next = %+v, %v; want a slot of %s", p.Email, r, err, task.ID)
			}
		}
		if r, err := d.NextTask(ctx, acct.ID, rs[2].ID, "", arbiter.QueueView{}); err != nil || r != nil {
			t.Errorf("a third reviewer's next = %+v, %v; want none", r, err)
		}
		// Ann votes; her slot closes and the task is not hers to take again,
		// while Bob keeps his and the last slot stays his.
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(rs[0], "approve")); err != nil {
			t.Fatal(err)
		}
		if r, err := d.NextTask(ctx, acct.ID, rs[0].ID, "", arbiter.QueueView{}); err != nil || r != nil {
			t.Errorf("ann's next after voting = %+v, %v; want none", r, err)
		}
		if r, err := d.NextTask(ctx, acct.ID, rs[2].ID, "", arbiter.QueueView{}); err != nil || r != nil {
			t.Errorf("cat's next while bob holds the last slot = %+v, %v; want none", r, err)
		}
		if list, _, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 10); err != nil || len(list) != 1 || list[0].Reservation != nil {
			t.Errorf("queue = %+v, %v; the task waits, unheld by the task's own reservation", list, err)
		}
	})
}

// Six reviewers asking for their next task at the same moment, over a
// queue of two-vote tasks, each get a slot of their own: the desk never
// sends a reviewer to a task whose slots others took between its pick and
// its reservation (on Postgres the pick sees the slots as they were when
// its statement began). Before, a reviewer could be sent to a task held
// by two others, and their vote was refused.
func TestConsensus_NextTaskAtOnceGivesEachTheirOwnSlot(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, owner, rs, _ := votingTeam(t, d, twoVotes)
		rs = append(rs, addReviewers(t, d, acct.ID, owner, "dan@example.com", "eve@example.com", "fay@example.com")...)
		// Eleven more, enough that some task is free whoever holds the rest.
		for range 11 {
			if _, err := d.CreateTask(ctx, acct.ID, votingTask(twoVotes)); err != nil {
				t.Fatal(err)
			}
		}
		claimed, err := d.ClaimTasks(ctx, "w", 20, time.Minute)
		if err != nil || len(claimed) != 11 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		for _, c := range claimed {
			if err := d.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
				t.Fatal(err)
			}
		}
		for round := range 100 {
			got := make([]*arbiter.Reservation, len(rs))
			errs := make([]error, len(rs))
			var start, done sync.WaitGroup
			start.Add(1)
			for i, p := range rs {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					got[i], errs[i] = d.NextTask(ctx, acct.ID, p.ID, "", arbiter.QueueView{})
				}()
			}
			start.Done()
			done.Wait()
			held := map[string]int{}
			for i, p := range rs {
				if errs[i] != nil || got[i] == nil || got[i].PersonID != p.ID {
					t.Fatalf("round %d: %s's next = %+v, %v; want a slot of their own", round, p.Email, got[i], errs[i])
				}
				if held[got[i].TaskID]++; held[got[i].TaskID] > 2 {
					t.Fatalf("round %d: more than two slots of %s", round, got[i].TaskID)
				}
			}
			for i, p := range rs {
				if err := d.ReleaseTask(ctx, acct.ID, got[i].TaskID, p.ID, "", false); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestConsensus_AVoteLeavesTheVotersQueue: once Ann has voted on a task
// that asks two votes, it waits for others, not her: it leaves her list,
// her count and her desk's places (its neighbours pass over it), while
// Bob, who has not voted, still finds it everywhere.
func TestConsensus_AVoteLeavesTheVotersQueue(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, _, rs, task := votingTeam(t, d, twoVotes)
		ann, bob := rs[0], rs[1]
		plain, err := d.CreateTask(ctx, acct.ID, taskCreate("plain, after the vote"))
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.ClaimTasks(ctx, "w", 10, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		if err := d.FinishAgentAttempt(ctx, "w", plain.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, voteBy(ann, "approve")); err != nil {
			t.Fatal(err)
		}
		ids := func(list []*arbiter.Task) []string {
			var out []string
			for _, t := range list {
				out = append(out, t.ID)
			}
			return out
		}
		for _, tc := range []struct {
			who  *arbiter.Person
			want []string
		}{
			{ann, []string{plain.ID}},
			{bob, []string{task.ID, plain.ID}},
		} {
			list, total, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{Voter: tc.who.ID}, 10)
			if err != nil || !slices.Equal(ids(list), tc.want) || total != len(tc.want) {
				t.Errorf("%s's queue = %v, total %d (%v); want %v", tc.who.Email, ids(list), total, err, tc.want)
			}
			if n, err := d.CountHumanQueue(ctx, acct.ID, tc.who.ID); err != nil || n != len(tc.want) {
				t.Errorf("%s's count = %d (%v), want %d", tc.who.Email, n, err, len(tc.want))
			}
		}
		if n, err := d.CountHumanQueue(ctx, acct.ID, ""); err != nil || n != 2 {
			t.Errorf("the account's count = %d (%v), want both tasks", n, err)
		}
		if p, err := d.FindQueuePlace(ctx, acct.ID, task.ID, ann.ID, arbiter.QueueView{Voter: ann.ID}); err != nil || p.Position != 0 || p.Total != 1 || p.Next != plain.ID {
			t.Errorf("ann's place of the task she voted on = %+v, %v; want none, with the plain task next", p, err)
		}
		if p, err := d.FindQueuePlace(ctx, acct.ID, plain.ID, ann.ID, arbiter.QueueView{Voter: ann.ID}); err != nil || p.Position != 1 || p.Total != 1 || p.Prev != "" {
			t.Errorf("ann's place of the plain task = %+v, %v; want 1 of 1, nothing before", p, err)
		}
		if p, err := d.FindQueuePlace(ctx, acct.ID, plain.ID, bob.ID, arbiter.QueueView{Voter: bob.ID}); err != nil || p.Position != 2 || p.Total != 2 || p.Prev != task.ID {
			t.Errorf("bob's place of the plain task = %+v, %v; want 2 of 2 after the task", p, err)
		}
	})
}
