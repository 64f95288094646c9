package db_test

import (
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// votingTask returns a create asking for the requirement.
func votingTask(r arbiter.ReviewRequirement) arbiter.TaskCreate {
	in := taskCreate("refund 900 EUR?")
	in.Review = &r
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
