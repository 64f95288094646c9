package db_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// reviewTeam returns an account with an owner and two reviewers, each
// with a session (for skips), and n tasks waiting for a human, oldest
// first.
func reviewTeam(t *testing.T, d *db.DB, c *clock, n int) (acct *arbiter.Account, ann, bob *arbiter.Session, tasks []*arbiter.Task) {
	t.Helper()
	acct = newAccount(t, d, "owner@example.com")
	owner := personOf(t, d, "owner@example.com")
	session := func(email string) *arbiter.Session {
		token := invite(t, d, acct.ID, email, arbiter.RoleReviewer, owner)
		p := personOf(t, d, email)
		if _, err := d.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		s, _, err := d.CreateSession(ctx, p.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ann, bob = session("ann@example.com"), session("bob@example.com")
	for range n {
		c.Add(time.Second)
		tasks = append(tasks, humanNeeded(t, d, acct.ID))
	}
	return acct, ann, bob, tasks
}

func TestReservations_TakeOverAndLateDecision(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct, ann, bob, tasks := reviewTeam(t, d, c, 2)
		task := tasks[0]

		// Ann opens the task: it is hers for the account's ten minutes.
		r, err := d.ReserveTask(ctx, acct.ID, task.ID, ann.PersonID)
		if err != nil || r == nil || r.PersonID != ann.PersonID || r.Email != "ann@example.com" {
			t.Fatalf("ann's reservation = %+v, %v", r, err)
		}
		if left := time.Until(r.Until.Time()); left < 9*time.Minute || left > 11*time.Minute {
			t.Errorf("the reservation lasts %v, want 10 minutes", left)
		}
		// Bob opens it too: he learns Ann holds it, and it stays hers.
		r, err = d.ReserveTask(ctx, acct.ID, task.ID, bob.PersonID)
		if err != nil || r.PersonID != ann.PersonID || !r.HeldByOther(bob.PersonID, arbiter.TimestampOf(time.Now())) {
			t.Fatalf("bob sees = %+v, %v", r, err)
		}
		// Bob's verdict on Ann's task is refused, saying who holds it.
		_, err = d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "bob@example.com", ReviewerID: bob.PersonID})
		wantCode(t, err, arbiter.ECONFLICT)
		if !strings.Contains(arbiter.ErrorMessage(err), "ann@example.com is working on this task") {
			t.Errorf("the conflict says %q", arbiter.ErrorMessage(err))
		}
		// The queue shows who holds it; j/k from the other task skip it.
		list, _, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 10)
		if err != nil || list[0].Reservation == nil || list[0].Reservation.Email != "ann@example.com" || list[1].Reservation != nil {
			t.Fatalf("queue = %+v, %v", list, err)
		}
		if p, err := d.FindQueuePlace(ctx, acct.ID, tasks[1].ID, bob.PersonID, arbiter.QueueView{}); err != nil || p.Prev != "" {
			t.Errorf("bob's previous task = %+v, %v; want none (ann holds it)", p, err)
		}
		if p, err := d.FindQueuePlace(ctx, acct.ID, tasks[1].ID, ann.PersonID, arbiter.QueueView{}); err != nil || p.Prev != task.ID {
			t.Errorf("ann's previous task = %+v, %v; want her own", p, err)
		}

		// Ann's reservation runs out; Bob takes the task over.
		if err := d.ExpireReservation(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		r, err = d.ReserveTask(ctx, acct.ID, task.ID, bob.PersonID)
		if err != nil || r.PersonID != bob.PersonID {
			t.Fatalf("take-over = %+v, %v", r, err)
		}
		// Ann's late decision is a conflict, not a second decision.
		_, err = d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "ann@example.com", ReviewerID: ann.PersonID})
		wantCode(t, err, arbiter.ECONFLICT)
		if !strings.Contains(arbiter.ErrorMessage(err), "bob@example.com is working on this task") {
			t.Errorf("the late decision's conflict says %q", arbiter.ErrorMessage(err))
		}
		// Bob decides; deciding releases the reservation.
		got, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "bob@example.com", ReviewerID: bob.PersonID})
		if err != nil || *got.FinalVerdict != "approve" {
			t.Fatalf("bob's decision = %+v, %v", got, err)
		}
		if r, err := d.ReserveTask(ctx, acct.ID, task.ID, ann.PersonID); err != nil || r != nil {
			t.Errorf("a decided task's reservation = %+v, %v", r, err)
		}
		// A reservation that ran out and that nobody took over still lets
		// its holder decide.
		if _, err := d.ReserveTask(ctx, acct.ID, tasks[1].ID, ann.PersonID); err != nil {
			t.Fatal(err)
		}
		if err := d.ExpireReservation(ctx, tasks[1].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DecideTask(ctx, acct.ID, tasks[1].ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "ann@example.com", ReviewerID: ann.PersonID}); err != nil {
			t.Errorf("decision after an unclaimed expiry: %v", err)
		}

		// Another account's task, and a person outside the account, are
		// not found.
		other := newAccount(t, d, "other@example.com")
		foreign := humanNeeded(t, d, other.ID)
		_, err = d.ReserveTask(ctx, acct.ID, foreign.ID, ann.PersonID)
		wantCode(t, err, arbiter.ENOTFOUND)
		stranger := personOf(t, d, "other@example.com")
		_, err = d.NextTask(ctx, acct.ID, stranger.ID, "", arbiter.QueueView{})
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}

// nextTaskID is the id of the task NextTask reserved; "" when none.
func nextTaskID(d *db.DB, accountID, personID, sessionID string, view arbiter.QueueView) (string, error) {
	held, err := d.NextTask(ctx, accountID, personID, sessionID, view)
	if held == nil {
		return "", err
	}
	return held.TaskID, err
}

func TestReservations_SkipGoesToTheEnd(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct, ann, bob, tasks := reviewTeam(t, d, c, 3)
		next := func(s *arbiter.Session) string {
			t.Helper()
			id, err := nextTaskID(d, acct.ID, s.PersonID, s.ID, arbiter.QueueView{})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		if got := next(ann); got != tasks[0].ID {
			t.Fatalf("ann's first = %s, want the oldest %s", got, tasks[0].ID)
		}
		// Ann skips the oldest: her next is the second, and the skipped
		// task comes after the third.
		if err := d.ReleaseTask(ctx, acct.ID, tasks[0].ID, ann.PersonID, ann.ID, true); err != nil {
			t.Fatal(err)
		}
		if got := next(ann); got != tasks[1].ID {
			t.Fatalf("after a skip = %s, want %s", got, tasks[1].ID)
		}
		// Bob did not skip it: his next is the oldest, which Ann let go.
		if got := next(bob); got != tasks[0].ID {
			t.Fatalf("bob's next = %s, want %s", got, tasks[0].ID)
		}
		// Ann's next: the one Bob holds and her own are not handed out again.
		if err := d.ReleaseTask(ctx, acct.ID, tasks[1].ID, ann.PersonID, ann.ID, true); err != nil {
			t.Fatal(err)
		}
		if got := next(ann); got != tasks[2].ID {
			t.Fatalf("ann's third = %s, want %s", got, tasks[2].ID)
		}
		// Holding one task at a time: taking the third released nothing of
		// Bob's, and Ann holds only the third.
		list, _, _ := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 10)
		holders := map[string]string{}
		for _, task := range list {
			if task.Reservation != nil {
				holders[task.ID] = task.Reservation.Email
			}
		}
		if len(holders) != 2 || holders[tasks[0].ID] != "bob@example.com" || holders[tasks[2].ID] != "ann@example.com" {
			t.Errorf("holders = %v", holders)
		}
		// Unknown and foreign tasks are not found; skipping changes nothing.
		wantCode(t, d.ReleaseTask(ctx, acct.ID, "tsk_0000000000000000", ann.PersonID, ann.ID, true), arbiter.ENOTFOUND)
		wantCode(t, d.ReleaseTask(ctx, acct.ID, "not-an-id", ann.PersonID, ann.ID, true), arbiter.ENOTFOUND)
	})
}

// TestReservations_TwoReviewersNeverGetTheSameTask has reviewers press
// "next" at the same moment, round after round: no task is handed to two.
func TestReservations_TwoReviewersNeverGetTheSameTask(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		const rounds = 10
		acct, ann, bob, _ := reviewTeam(t, d, c, 2*rounds)
		seen := map[string]string{}
		for round := range rounds {
			var got [2]string
			var errs [2]error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, s := range []*arbiter.Session{ann, bob} {
				wg.Go(func() {
					<-start
					got[i], errs[i] = nextTaskID(d, acct.ID, s.PersonID, s.ID, arbiter.QueueView{})
				})
			}
			close(start)
			wg.Wait()
			for i, s := range []*arbiter.Session{ann, bob} {
				if errs[i] != nil || got[i] == "" {
					t.Fatalf("round %d, %s: %q, %v", round, s.Email, got[i], errs[i])
				}
				if prev, ok := seen[got[i]]; ok {
					t.Fatalf("round %d: %s got %s, already handed to %s", round, s.Email, got[i], prev)
				}
				seen[got[i]] = s.Email
			}
			// Each decides theirs, as the desk does before the next.
			for i, s := range []*arbiter.Session{ann, bob} {
				if _, err := d.DecideTask(ctx, acct.ID, got[i], arbiter.HumanDecision{Verdict: "approve", Reviewer: s.Email, ReviewerID: s.PersonID}); err != nil {
					t.Fatalf("round %d, %s decides: %v", round, s.Email, err)
				}
			}
		}
		if n, _ := d.CountHumanQueue(ctx, acct.ID, ""); n != 0 || len(seen) != 2*rounds {
			t.Errorf("left %d, handed out %d", n, len(seen))
		}
	})
}

// One person in several tabs opens tasks and asks for the next at once:
// each call reserves one task and releases the person's others, which
// must not lock the same rows in opposite orders (a deadlock on Postgres).
func TestReservations_OnePersonInManyTabsNeverDeadlocks(t *testing.T) {
	t.Parallel()
	c := newClock()
	// A deadlock is an error at once on Postgres (40P01), and SQLite, whose
	// writers take its one lock up front, cannot have one. What a slow
	// machine can do is make one of eight SQLite writers wait on that lock
	// past the default 5 s (its busy handler is not fair): seen once under
	// -race in a full test run. The test is about deadlocks, so its calls
	// may wait a minute.
	dbtest.Each(t, db.Options{Now: c.Now, Timeout: time.Minute}, func(t *testing.T, d *db.DB) {
		acct, ann, _, tasks := reviewTeam(t, d, c, 4)
		var wg sync.WaitGroup
		errs := make(chan error, 8*50)
		for tab := range 8 {
			wg.Go(func() {
				for i := range 50 {
					var err error
					if (tab+i)%3 == 0 {
						_, err = d.NextTask(ctx, acct.ID, ann.PersonID, ann.ID, arbiter.QueueView{})
					} else {
						_, err = d.ReserveTask(ctx, acct.ID, tasks[(tab+i)%len(tasks)].ID, ann.PersonID)
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a tab's reservation failed: %v", err)
		}
	})
}

// TestReservations_NeverOutliveTheDeadline: opening a task, taking the
// next one and holding a vote's slot each reserve it for the account's
// ten minutes, or until the task's deadline when that comes sooner.
func TestReservations_NeverOutliveTheDeadline(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		create := func(prompt string, deadline int, review *arbiter.ReviewRequirement) *arbiter.Task {
			in := taskCreate(prompt)
			in.DeadlineSeconds, in.Review = deadline, review
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		soon := create("due in two minutes", 120, nil)
		later := create("no deadline", 0, nil)
		voted := create("two votes, due in two minutes", 120, &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous})
		toHumanAll(t, d)

		r, err := d.ReserveTask(ctx, acct.ID, soon.ID, owner.ID)
		if err != nil || r == nil || r.Until != *soon.DeadlineAt {
			t.Errorf("opening a task due in two minutes reserves it until %v (%v), want its deadline %v", r, err, *soon.DeadlineAt)
		}
		r, err = d.ReserveTask(ctx, acct.ID, later.ID, owner.ID)
		if left := time.Until(r.Until.Time()); err != nil || left < 9*time.Minute || left > 11*time.Minute {
			t.Errorf("a task without a deadline is reserved for %v (%v), want the account's ten minutes", left, err)
		}
		r, err = d.ReserveTask(ctx, acct.ID, voted.ID, owner.ID)
		if err != nil || r == nil || r.Until != *voted.DeadlineAt {
			t.Errorf("a vote's slot lasts until %v (%v), want the task's deadline %v", r, err, *voted.DeadlineAt)
		}
		// The next task the desk gives (the oldest, which opening the
		// others released) is held no longer either.
		next, err := d.NextTask(ctx, acct.ID, owner.ID, "", arbiter.QueueView{})
		if err != nil || next == nil || next.TaskID != soon.ID || next.Until != *soon.DeadlineAt {
			t.Errorf("the next task = %+v (%v), want %s held until its deadline %v", next, err, soon.ID, *soon.DeadlineAt)
		}
	})
}
