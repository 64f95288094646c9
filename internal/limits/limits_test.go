package limits_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/limits"
)

var ctx = context.Background()

// twoProcesses returns the limits of two stores on one fresh Postgres
// schema, as two processes of one deployment have them.
func twoProcesses(t *testing.T) (a, b *db.DB) {
	t.Helper()
	url := dbtest.URL(t, db.Postgres)
	return dbtest.OpenURL(t, url, db.Options{}), dbtest.OpenURL(t, url, db.Options{})
}

// eachKind runs fn with the limits of one process on SQLite (in memory)
// and on Postgres (shared).
func eachKind(t *testing.T, fn func(t *testing.T, l limits.Limits)) {
	t.Helper()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			l := dbtest.Open(t, dialect, db.Options{}).Limits()
			if l.Shared() != (dialect == db.Postgres) {
				t.Fatalf("%s limits shared = %v", dialect, l.Shared())
			}
			fn(t, l)
		})
	}
}

func allow(t *testing.T, l arbiter.RateLimit, key string) (bool, time.Duration) {
	t.Helper()
	ok, wait, err := l.Allow(ctx, key)
	if err != nil {
		t.Fatalf("Allow(%q): %v", key, err)
	}
	return ok, wait
}

func TestRate_BurstThenRefusedWithTheWait(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, l limits.Limits) {
		r := l.Rate("t", 3, time.Hour)
		for i := range 3 {
			if ok, _ := allow(t, r, "a"); !ok {
				t.Fatalf("request %d of a burst of 3 refused", i)
			}
		}
		ok, wait := allow(t, r, "a")
		if ok || wait < 59*time.Minute || wait > time.Hour {
			t.Fatalf("the 4th request = %v, wait %v; want refused, about an hour", ok, wait)
		}
		if ok, _ := allow(t, r, "b"); !ok {
			t.Fatal("another key shares a's bucket")
		}
		if ok, wait, err := r.Available(ctx, "a"); err != nil || ok || wait < 59*time.Minute {
			t.Fatalf("Available on the empty bucket = %v, %v, %v", ok, wait, err)
		}
		if ok, _, err := r.Available(ctx, "c"); err != nil || !ok {
			t.Fatalf("Available on a new key = %v, %v", ok, err)
		}
	})
}

func TestRate_ReturnGivesBackOneAndNeverPastTheBurst(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, l limits.Limits) {
		r := l.Rate("t", 2, time.Hour)
		allow(t, r, "a")
		allow(t, r, "a")
		if ok, _ := allow(t, r, "a"); ok {
			t.Fatal("a third request passed a burst of 2")
		}
		if err := r.Return(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := allow(t, r, "a"); !ok {
			t.Fatal("a returned request cannot be spent again")
		}
		if ok, _ := allow(t, r, "a"); ok {
			t.Fatal("Return gave back more than one request")
		}
		// Returns to a full bucket give nothing past the burst.
		allow(t, r, "b")
		for range 3 {
			if err := r.Return(ctx, "b"); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []bool{true, true, false} {
			if ok, _ := allow(t, r, "b"); ok != want {
				t.Fatalf("request %d after returns = %v, want %v", i, ok, want)
			}
		}
	})
}

func TestRate_RefillsOneRequestPerInterval(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, l limits.Limits) {
		const every = 100 * time.Millisecond
		r := l.Rate("t", 2, every)
		allow(t, r, "a")
		allow(t, r, "a")
		ok, wait := allow(t, r, "a")
		if ok || wait <= 0 || wait > every {
			t.Fatalf("an empty bucket = %v, wait %v; want refused within %v", ok, wait, every)
		}
		// It passes again once the wait it announced has passed.
		deadline := time.Now().Add(time.Minute)
		for {
			ok, wait = allow(t, r, "a")
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the bucket never refilled")
			}
			time.Sleep(wait)
		}
		if ok, _ := allow(t, r, "a"); ok {
			t.Fatal("the bucket refilled more than one request in one interval")
		}
	})
}

// TestShared_RateHoldsAcrossProcesses: a bucket of 20 spent by two
// processes at once, 16 requests at a time, lets 20 through in all.
func TestShared_RateHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t)
	limits := []arbiter.RateLimit{a.Limits().Rate("signin", 20, time.Hour), b.Limits().Rate("signin", 20, time.Hour)}
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 10 {
				ok, wait, err := limits[i%2].Allow(ctx, "203.0.113.9")
				switch {
				case err != nil:
					t.Error(err)
					return
				case ok:
					passed.Add(1)
				case wait < 30*time.Minute:
					t.Errorf("a refusal's wait = %v, want nearly the hour until the next request", wait)
				default:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 20 || refused.Load() != 140 {
		t.Fatalf("two processes let %d of 160 requests through (refused %d), want the bucket's 20", passed.Load(), refused.Load())
	}
	// A request given back is spent again, once.
	if err := limits[0].Return(ctx, "203.0.113.9"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := allow(t, limits[0], "203.0.113.9"); !ok {
		t.Fatal("a request given back cannot be spent")
	}
	if ok, _ := allow(t, limits[0], "203.0.113.9"); ok {
		t.Fatal("a request given back was spent twice")
	}
	// A name is its own limit: the same key under another name is fresh.
	if ok, _ := allow(t, b.Limits().Rate("demo", 1, time.Hour), "203.0.113.9"); !ok {
		t.Fatal("two limits' buckets of one key are shared")
	}
}

// TestShared_RefusalsAskTheDatabaseOnce: a client refused is refused
// again until its wait passes without a statement, so that hammering an
// empty bucket costs the database nothing more.
func TestShared_RefusalsAskTheDatabaseOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	store := dbtest.OpenURL(t, url, db.Options{})
	r := store.Limits().Rate("keys", 1, time.Hour)
	allow(t, r, "a")
	if ok, _ := allow(t, r, "a"); ok {
		t.Fatal("a second request passed a burst of 1")
	}
	// Empty the bucket's table behind the limit's back: a limit that asked
	// the database would now find the key unknown, and let it through.
	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`DELETE FROM limit_buckets`); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if ok, wait := allow(t, r, "a"); ok || wait < 59*time.Minute {
			t.Fatalf("a refused key = %v, %v before its wait passed", ok, wait)
		}
	}
}

func acquire(t *testing.T, l arbiter.SlotLimit, key string) (func(), bool) {
	t.Helper()
	release, ok, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return release, ok
}

func TestSlots_BoundPerKeyAndGivenBack(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, l limits.Limits) {
		s := l.Slots("t", 2)
		r1, ok1 := acquire(t, s, "a")
		r2, ok2 := acquire(t, s, "a")
		if _, ok := acquire(t, s, "a"); !ok1 || !ok2 || ok {
			t.Fatalf("three acquires of 2 slots = %v %v %v", ok1, ok2, ok)
		}
		rb, ok := acquire(t, s, "b")
		if !ok {
			t.Fatal("another key's slot was taken by a's")
		}
		r1()
		r1() // a second release gives nothing back
		r3, ok := acquire(t, s, "a")
		if !ok {
			t.Fatal("a released slot was not given back")
		}
		if _, ok := acquire(t, s, "a"); ok {
			t.Fatal("a second call of release gave a second slot back")
		}
		r2()
		r3()
		rb()
	})
}

// TestShared_SlotsHoldAcrossProcesses: 32 slots of an account taken by
// two processes, 24 requests at a time each, never more than 32 at once;
// and a slot one process gives back is taken by the other.
func TestShared_SlotsHoldAcrossProcesses(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t)
	slots := []arbiter.SlotLimit{a.Limits().Slots("mcp", 32), b.Limits().Slots("mcp", 32)}
	var held, most, taken atomic.Int64
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() {
			for range 5 {
				release, ok, err := slots[i%2].Acquire(ctx, "acct_1")
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				taken.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if most.Load() > 32 || taken.Load() < 32 {
		t.Fatalf("at most %d held at once (%d taken in all); want at most 32, and 32 taken", most.Load(), taken.Load())
	}
	var releases []func()
	for i := range 32 {
		r, ok := acquire(t, slots[i%2], "acct_1")
		if !ok {
			t.Fatalf("slot %d of 32 refused after every slot was given back", i)
		}
		releases = append(releases, r)
	}
	if _, ok := acquire(t, slots[1], "acct_1"); ok {
		t.Fatal("a 33rd slot was taken")
	}
	releases[0]() // process a's
	if _, ok := acquire(t, slots[1], "acct_1"); !ok {
		t.Fatal("process b cannot take the slot process a gave back")
	}
}

// TestShared_SlotsOfAProcessThatEndedAreGivenBack: the slots of a
// process that ended without giving them back (kill -9) are freed once its
// heartbeat's lease has lapsed, and only its own.
func TestShared_SlotsOfAProcessThatEndedAreGivenBack(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	a, b := dbtest.OpenURL(t, url, db.Options{}), dbtest.OpenURL(t, url, db.Options{})
	sa, sb := a.Limits().Slots("waiters", 3), b.Limits().Slots("waiters", 3)
	acquire(t, sa, "key_1")
	acquire(t, sa, "key_1")
	releaseB, _ := acquire(t, sb, "key_1")
	if _, ok := acquire(t, sb, "key_1"); ok {
		t.Fatal("a 4th slot was taken")
	}
	a.Close() // process a ends; its heartbeat stops, its slots stay held
	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	shared := b.Limits().(*limits.Shared)
	if err := shared.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := acquire(t, sb, "key_1"); ok {
		t.Fatal("a live process's slots were given back before its lease lapsed")
	}
	// Its lease lapses (as 30 s without a beat would have it).
	res, err := admin.Exec(`UPDATE limit_processes SET expires_at = 0 WHERE process = $1`, a.Limits().(*limits.Shared).ProcessID())
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("lapse a's lease: %v rows, %v", n, err)
	}
	if err := shared.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r1, ok1 := acquire(t, sb, "key_1")
	r2, ok2 := acquire(t, sb, "key_1")
	if _, ok3 := acquire(t, sb, "key_1"); !ok1 || !ok2 || ok3 {
		t.Fatalf("after a's lease lapsed: %v %v %v; want its 2 slots back, and b's own still held", ok1, ok2, ok3)
	}
	releaseB()
	r1()
	r2()
	var held int
	if err := admin.QueryRow(`SELECT held FROM limit_slots`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("slots held after every release = %d, %v", held, err)
	}
}

// TestShared_StateChangesInTurns: two processes add to one value at once,
// and no addition is lost.
func TestShared_StateChangesInTurns(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t)
	states := []limits.State{a.LimitState(), b.LimitState()}
	if dbtest.Open(t, db.SQLite, db.Options{}).LimitState() != nil {
		t.Fatal("SQLite has a shared state")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 10 {
				err := states[i%2].Update(ctx, "counter", func(v []byte, now time.Time) ([]byte, error) {
					if now.IsZero() || time.Since(now).Abs() > time.Minute {
						t.Errorf("the database's time is %v", now)
					}
					var n int
					if v != nil {
						if err := json.Unmarshal(v, &n); err != nil {
							return nil, err
						}
					}
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	err := states[0].Update(ctx, "counter", func(v []byte, _ time.Time) ([]byte, error) {
		if string(v) != "80" {
			t.Errorf("the counter = %s after 80 additions", v)
		}
		return v, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
