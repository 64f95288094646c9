package db_test

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestCountOpenTasks_CountsEachStatusNotYetFinal(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		b := newAccount(t, d, "b@example.com")
		humanNeeded(t, d, b.ID)
		decidedTask := humanNeeded(t, d, b.ID)
		if _, err := d.DecideTask(ctx, b.ID, decidedTask.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r"}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := d.CreateTask(ctx, a.ID, taskCreate("pending")); err != nil {
				t.Fatal(err)
			}
		}
		if claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute); err != nil || len(claimed) != 1 {
			t.Fatalf("claimed %d (%v)", len(claimed), err)
		}
		got, err := d.CountOpenTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{arbiter.StatusPending: 2, arbiter.StatusAgentRunning: 1, arbiter.StatusHumanNeeded: 1}
		for status, n := range want {
			if got[status] != n {
				t.Errorf("%s = %d, want %d (all: %v)", status, got[status], n, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("counts = %v, want only the open statuses", got)
		}
	})
}
