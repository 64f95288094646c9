package db_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestSQLite_WritersTakeTurnsInOrder: writers that find another's
// transaction writing wait for it, and then write in the order they came,
// not in the order SQLite's retries happen to find the lock free. Readers
// do not wait at all.
func TestSQLite_WritersTakeTurnsInOrder(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.SQLite, db.Options{})
	acct := newAccount(t, d, "a@example.com")
	known, err := d.CreateTask(ctx, acct.ID, taskCreate("known"))
	if err != nil {
		t.Fatal(err)
	}
	release, err := d.HoldWriteTurn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 6
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = d.CreateTask(ctx, acct.ID, taskCreate(fmt.Sprint("writer ", i)))
		})
		// The next writer comes once this one waits.
		for deadline := time.Now().Add(time.Minute); d.WritersWaiting() != int64(i+1); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d writers wait, want %d", d.WritersWaiting(), i+1)
			}
		}
	}
	// A reader is answered while every writer waits.
	if got, err := d.FindTaskByID(ctx, acct.ID, known.ID); err != nil || got.Prompt != "known" {
		t.Fatalf("a read while writers waited: %v (%v)", got, err)
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	prompts, err := d.PromptsInWriteOrder(ctx, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"known"}
	for i := range writers {
		want = append(want, fmt.Sprint("writer ", i))
	}
	if !slices.Equal(prompts, want) {
		t.Errorf("tasks were written in the order %q, want %q", prompts, want)
	}
}

// TestSQLite_AWriteWaitsNoLongerThanTheTimeout: a writer whose turn does
// not come within the store's timeout is EUNAVAILABLE (a 503 with
// Retry-After on the API) and writes nothing.
func TestSQLite_AWriteWaitsNoLongerThanTheTimeout(t *testing.T) {
	// Not parallel: its store times out after 200 ms, and a machine busy
	// with other tests would time out the steps meant to pass.
	d := dbtest.Open(t, db.SQLite, db.Options{Timeout: 200 * time.Millisecond})
	acct := newAccount(t, d, "a@example.com")
	release, err := d.HoldWriteTurn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateTask(ctx, acct.ID, taskCreate("too late"))
	release()
	wantCode(t, err, arbiter.EUNAVAILABLE)
	if page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Limit: 10}); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("after the refused write: %d tasks (%v), want none", len(page.Tasks), err)
	}
	if d.WritersWaiting() != 0 {
		t.Errorf("%d writers still wait", d.WritersWaiting())
	}
	// The turn is free again.
	if _, err := d.CreateTask(ctx, acct.ID, taskCreate("in time")); err != nil {
		t.Fatal(err)
	}
}
