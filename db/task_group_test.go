package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// Group commit is Postgres-only; SQLite stores each create on its own.

func wantUsage(t *testing.T, d *db.DB, accountID string, want int) {
	t.Helper()
	if used, _, err := d.UsageToday(ctx, accountID); err != nil || used != want {
		t.Fatalf("usage of %s = %d (%v), want %d", accountID, used, err, want)
	}
}

func TestCreateGroup_StoresEveryCreateOnce(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	a := newAccount(t, d, "a@example.com")
	b := newAccount(t, d, "b@example.com")
	tasks, errs := d.StoreGroup(ctx, []string{a.ID, b.ID, a.ID, b.ID, a.ID}, taskCreate("Grouped"))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		got, err := d.FindTaskByID(ctx, tasks[i].AccountID, tasks[i].ID)
		if err != nil {
			t.Fatalf("create %d not stored: %v", i, err)
		}
		if got.Status != arbiter.StatusPending || got.Prompt != "Grouped" || got.TaskType != "decide" ||
			got.Touchpoint != "chat" || got.ConfidenceThreshold != 0.9 || len(got.AllowedVerdicts) != 2 ||
			string(got.Context) != `{"amount":12}` || got.CreatedAt != tasks[i].CreatedAt {
			t.Fatalf("stored = %+v", got)
		}
	}
	if got := d.Grouped(); got != 5 {
		t.Fatalf("group statement stored %d creates, want all 5", got)
	}
	wantUsage(t, d, a.ID, 3)
	wantUsage(t, d, b.ID, 2)

	noContext := taskCreate("No context")
	noContext.Context = nil
	tasks, errs = d.StoreGroup(ctx, []string{a.ID, b.ID}, noContext)
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d.FindTaskByID(ctx, tasks[i].AccountID, tasks[i].ID); err != nil || got.Context != nil {
			t.Fatalf("stored = %+v, %v; want no context", got, err)
		}
	}
	if got := d.Grouped(); got != 7 {
		t.Fatalf("group statements stored %d creates, want 7", got)
	}
}

func TestCreateGroup_CapAdmitsExactlyWhatFits(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{DailyTaskCap: 3})
	full := newAccount(t, d, "full@example.com")
	free := newAccount(t, d, "free@example.com")
	for range 2 {
		if _, err := d.CreateTask(ctx, full.ID, taskCreate("earlier")); err != nil {
			t.Fatal(err)
		}
	}
	// Three creates for an account with room for one, beside two that fit.
	_, errs := d.StoreGroup(ctx, []string{full.ID, free.ID, full.ID, free.ID, full.ID}, taskCreate("Grouped"))
	var admitted, limited int
	for i, err := range errs {
		switch {
		case i == 1 || i == 3:
			if err != nil {
				t.Fatalf("create %d of the account with room: %v", i, err)
			}
		case err == nil:
			admitted++
		case arbiter.ErrorCode(err) == arbiter.ERATELIMIT:
			limited++
		default:
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if admitted != 1 || limited != 2 {
		t.Fatalf("the full account got %d admitted and %d limited, want 1 and 2", admitted, limited)
	}
	wantUsage(t, d, full.ID, 3)
	wantUsage(t, d, free.ID, 2)
}

func TestCreateGroup_BadCreateFailsAlone(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	a := newAccount(t, d, "a@example.com")
	// An account that does not exist fails the group statement's foreign
	// key; the others are then stored one by one.
	_, errs := d.StoreGroup(ctx, []string{a.ID, "acct_missing", a.ID}, taskCreate("Grouped"))
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("errors = %v, want only the second to fail", errs)
	}
	if got := d.Grouped(); got != 0 {
		t.Fatalf("group statement stored %d, want 0 (it failed as a whole)", got)
	}
	wantUsage(t, d, a.ID, 2)
}

func TestCreateTask_ConcurrentCreatesAreGrouped(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	accounts := make([]*arbiter.Account, 10)
	for i := range accounts {
		accounts[i] = newAccount(t, d, string(rune('a'+i))+"@example.com")
	}
	var mu sync.Mutex
	ids := map[string]string{} // task → account
	var wg sync.WaitGroup
	// Hold the groups until all 200 are queued, so that they must share.
	release := d.HoldGroups()
	for i := range 200 {
		wg.Go(func() {
			task, err := d.CreateTask(ctx, accounts[i%10].ID, taskCreate("Concurrent"))
			if err != nil {
				t.Errorf("create: %v", err)
				return
			}
			mu.Lock()
			ids[task.ID] = task.AccountID
			mu.Unlock()
		})
	}
	waitQueued(t, d, 200)
	release()
	wg.Wait()
	if len(ids) != 200 {
		t.Fatalf("%d distinct tasks, want 200", len(ids))
	}
	for _, a := range accounts {
		wantUsage(t, d, a.ID, 20)
	}
	for id, accountID := range ids {
		if _, err := d.FindTaskByID(ctx, accountID, id); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	if got := d.Grouped(); got != 200 {
		t.Fatalf("group statements stored %d of 200 queued creates", got)
	}
	if d.Queued() != 0 {
		t.Fatalf("%d creates left in the queue", d.Queued())
	}
}

// waitQueued waits until n calls are queued.
func waitQueued(t *testing.T, d *db.DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.Queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", d.Queued(), n)
		}
	}
}

func TestCreateTask_CanceledWhileQueuedStoresNothing(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	a := newAccount(t, d, "a@example.com")
	release := d.HoldGroups()
	canceled, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := d.CreateTask(canceled, a.ID, taskCreate("Withdrawn"))
		done <- err
	}()
	waitQueued(t, d, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d.Queued() != 0 {
		t.Fatalf("%d creates still queued after the caller left", d.Queued())
	}
	// A create queued while the groups are held is stored once they run.
	stored := make(chan error)
	go func() {
		_, err := d.CreateTask(ctx, a.ID, taskCreate("Kept"))
		stored <- err
	}()
	waitQueued(t, d, 1)
	release()
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	wantUsage(t, d, a.ID, 1)
}

func TestReadGroup_AnswersEachReadAsASingleReadWould(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	owner := newAccount(t, d, "owner@example.com")
	other := newAccount(t, d, "other@example.com")
	plain, err := d.CreateTask(ctx, owner.ID, taskCreate("Plain"))
	if err != nil {
		t.Fatal(err)
	}
	tried, err := d.CreateTask(ctx, owner.ID, taskCreate("Tried"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ClaimTasks(ctx, "w1", 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.FinishAgentAttempt(ctx, "w1", tried.ID, decided("approve", 0.97)); err != nil {
		t.Fatal(err)
	}

	refs := [][2]string{
		{owner.ID, plain.ID},
		{owner.ID, tried.ID},
		{other.ID, plain.ID},               // another account's task
		{owner.ID, "tsk_00000000000000ff"}, // no such task
		{owner.ID, tried.ID},               // asked twice
	}
	tasks, errs := d.ReadGroup(ctx, refs)
	for i, ref := range refs {
		single, singleErr := d.FindTaskByID(ctx, ref[0], ref[1])
		if arbiter.ErrorCode(errs[i]) != arbiter.ErrorCode(singleErr) || (errs[i] == nil) != (singleErr == nil) {
			t.Fatalf("read %d: error %v, a single read's %v", i, errs[i], singleErr)
		}
		if singleErr != nil {
			continue
		}
		got, want := tasks[i], single
		if got.ID != want.ID || got.Status != want.Status || got.Prompt != want.Prompt ||
			len(got.Attempts) != len(want.Attempts) || (got.FinalVerdict == nil) != (want.FinalVerdict == nil) {
			t.Fatalf("read %d = %+v, a single read's %+v", i, got, want)
		}
	}
	if errs[2] == nil || arbiter.ErrorCode(errs[2]) != arbiter.ENOTFOUND {
		t.Fatalf("another account's task: %v, want ENOTFOUND", errs[2])
	}
	if len(tasks[1].Attempts) != 1 || *tasks[1].FinalVerdict != "approve" {
		t.Fatalf("attempts = %+v", tasks[1].Attempts)
	}
	if tasks[1] == tasks[4] {
		t.Fatal("two readers of one task share one value")
	}
	if got := d.GroupedReads(); got != int64(len(refs)) {
		t.Fatalf("group query answered %d reads, want %d", got, len(refs))
	}
}

func TestFindTaskByID_ConcurrentReadsAreGrouped(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	owner := newAccount(t, d, "owner@example.com")
	other := newAccount(t, d, "other@example.com")
	var ids []string
	for range 20 {
		task, err := d.CreateTask(ctx, owner.ID, taskCreate("Read me"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	var wg sync.WaitGroup
	release := d.HoldGroups()
	for i := range 400 {
		wg.Go(func() {
			id := ids[i%len(ids)]
			if i%4 == 3 {
				if _, err := d.FindTaskByID(ctx, other.ID, id); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
					t.Errorf("another account read %s: %v", id, err)
				}
				return
			}
			got, err := d.FindTaskByID(ctx, owner.ID, id)
			if err != nil || got.ID != id || got.Prompt != "Read me" {
				t.Errorf("read %s = %+v, %v", id, got, err)
			}
		})
	}
	waitQueued(t, d, 400)
	release()
	wg.Wait()
	if got := d.GroupedReads(); got != 400 {
		t.Fatalf("group queries answered %d of 400 queued reads", got)
	}
}
