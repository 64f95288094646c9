package limits_test

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/limits"
	"github.com/arbiterhq/arbiter/internal/testutil"
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

// TestRate_RefillsOneRequestPerInterval: an empty bucket refuses with the
// wait until its next request, passes one once that wait has passed, and
// refuses the one after until another interval has. A trial whose check
// came after the second request was due (the sleep overslept, on a busy
// machine) proves nothing of the bound, so it is tried again.
func TestRate_RefillsOneRequestPerInterval(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, l limits.Limits) {
		const every = 100 * time.Millisecond
		r := l.Rate("t", 2, every)
		allow(t, r, "a")
		for deadline := time.Now().Add(time.Minute); ; {
			if time.Now().After(deadline) {
				t.Fatal("no trial ran without oversleeping in a minute")
			}
			// Empty the bucket; the refusal says when the next request is due.
			refusedBy := time.Now()
			ok, wait := allow(t, r, "a")
			for ok {
				refusedBy = time.Now()
				ok, wait = allow(t, r, "a")
			}
			if wait <= 0 || wait > every {
				t.Fatalf("an empty bucket refused with a wait of %v; want one within %v", wait, every)
			}
			due := refusedBy.Add(wait + every - 5*time.Millisecond)
			// It passes again once the wait it announced has passed.
			for !ok {
				if time.Now().After(deadline) {
					t.Fatal("the bucket never refilled")
				}
				time.Sleep(wait)
				ok, wait = allow(t, r, "a")
			}
			// The request after it is due an interval after the one that
			// passed: no sooner than the refusal, its wait and every (less
			// a margin for the clocks' rounding).
			again, _ := allow(t, r, "a")
			if !time.Now().Before(due) {
				continue // overslept: the next request may be due
			}
			if again {
				t.Fatal("the bucket refilled more than one request in one interval")
			}
			return
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

// pass is a request a rate limit let through: it began at began and
// ended at ended, microseconds on the clock the database's shares.
type pass struct{ began, ended int64 }

// checkRateBound fails t when more of passes than burst + 1 + window /
// every fall in a window: the requests that begin at or after one began
// and end by the time one ended. A limit that reserves requests in
// blocks, each charged to the bucket at most every before it passes,
// passes at most that many (the bucket's own bound, burst + window /
// every, and one more).
func checkRateBound(t *testing.T, passes []pass, burst int, every time.Duration) {
	t.Helper()
	slices.SortFunc(passes, func(x, y pass) int { return cmp.Compare(x.began, y.began) })
	for i, first := range passes {
		var ends []int64
		for _, p := range passes[i:] {
			ends = append(ends, p.ended)
		}
		slices.Sort(ends)
		for m, end := range ends {
			if most := int64(burst) + 1 + (end-first.began)/every.Microseconds(); int64(m+1) > most {
				t.Fatalf("%d requests passed within %v, want at most %d (burst %d, one every %v, and one more)",
					m+1, time.Duration(end-first.began)*time.Microsecond, most, burst, every)
			}
		}
	}
}

// whileRowLocked runs fn while another transaction of admin holds the
// row of key in table locked, as a busy process's statement would: what
// fn does without a statement goes through, what needs the row waits.
func whileRowLocked(t *testing.T, admin *sql.DB, table, key string, fn func()) {
	t.Helper()
	tx, err := admin.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := tx.Exec(`SELECT 1 FROM `+table+` WHERE key = $1 FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	fn()
}

// bucketFull reports whether the bucket of key, read by admin, is full:
// its theoretical arrival time has passed (or it has none).
func bucketFull(t *testing.T, admin *sql.DB, key string) bool {
	t.Helper()
	var full bool
	err := admin.QueryRow(`SELECT coalesce(bool_and(tat <= (extract(epoch FROM now()) * 1000000)::bigint), true)
FROM limit_buckets WHERE key = $1`, key).Scan(&full)
	if err != nil {
		t.Fatal(err)
	}
	return full
}

// TestShared_RateInBlocksHoldsAcrossProcesses: two processes spending one
// key's bucket of 64 (one more every 20 ms) from 16 goroutines never let
// through more than the bucket states and one more, in any window: a
// first round leaves blocks half used (3 requests a goroutine); once the
// bucket is full again, a second round spends it until refused, and on
// for 20 intervals, each goroutine pausing now and then so that blocks
// lapse half used. The requests left in the first round's blocks lapsed:
// spent with the refilled bucket, they would be more than it holds.
func TestShared_RateInBlocksHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	a, b := dbtest.OpenURL(t, url, db.Options{}), dbtest.OpenURL(t, url, db.Options{})
	admin := openAdmin(t, url)
	const burst, every = 64, 20 * time.Millisecond
	rates := []arbiter.RateLimit{a.Limits().Rate("failures", burst, every), b.Limits().Rate("failures", burst, every)}
	var mu sync.Mutex
	var passes []pass
	var passedBy [2]atomic.Int64
	// round runs 16 goroutines, each sending requests while more is true
	// of the n-th.
	round := func(more func(i, n int, start time.Time) bool) {
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 16 {
			wg.Go(func() {
				for n := 0; more(i, n, start); n++ {
					began := time.Now().UnixMicro()
					ok, wait, err := rates[i%2].Allow(ctx, "203.0.113.9")
					ended := time.Now().UnixMicro()
					switch {
					case err != nil:
						t.Error(err)
						return
					case !ok:
						time.Sleep(wait) // as a client told when to come back
						continue
					}
					mu.Lock()
					passes = append(passes, pass{began, ended})
					mu.Unlock()
					passedBy[i%2].Add(1)
					if (n+i)%7 == 0 {
						time.Sleep(time.Duration(1+(n+i)%3) * every) // a pause: blocks lapse half used
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	round(func(_, n int, _ time.Time) bool { return n < 3 })
	first := len(passes)
	waitFor(t, "the bucket is full again", func() bool { return bucketFull(t, admin, "failures:203.0.113.9") })
	round(func(_, _ int, start time.Time) bool { return time.Since(start) < 20*every })
	statements := a.Limits().(*limits.Shared).BlockStatements() + b.Limits().(*limits.Shared).BlockStatements()
	t.Logf("%d requests passed (%d through a, %d through b; %d in the first round) in %d statements",
		len(passes), passedBy[0].Load(), passedBy[1].Load(), first, statements)
	if passedBy[0].Load() == 0 || passedBy[1].Load() == 0 || first != 48 {
		t.Fatalf("%d and %d requests passed through the processes, %d of 48 in the first round: want some through each, and all 48",
			passedBy[0].Load(), passedBy[1].Load(), first)
	}
	checkRateBound(t, passes, burst, every)
}

// TestShared_RateBlocksLapseAfterAnInterval: the requests a process
// reserved and did not hand out lapse once every has passed since it
// reserved them: after another process emptied the bucket, they do not
// pass (they would be more than the bucket holds).
func TestShared_RateBlocksLapseAfterAnInterval(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t)
	const burst, every = 24, time.Second
	ra, rb := a.Limits().Rate("lapse", burst, every), b.Limits().Rate("lapse", burst, every)
	// One request at a time, each finding the block used up: blocks of
	// 1, 2 and 3, two of the last still held.
	var reserved time.Time // by then the last block's statement was sent
	for i := range 4 {
		if ok, _ := allow(t, ra, "k"); !ok {
			t.Fatalf("request %d of a burst of %d refused", i, burst)
		}
		reserved = time.Now()
	}
	if held := limits.RequestsHeld(ra, "k"); held != 2 {
		t.Fatalf("process a holds %d requests of its blocks, want 2", held)
	}
	// The rule itself is a length of time: a block lapses every after its
	// reservation was sent.
	time.Sleep(every - time.Since(reserved))
	if held := limits.RequestsHeld(ra, "k"); held != 0 {
		t.Fatalf("process a holds %d requests of a block reserved %v ago, every %v", held, time.Since(reserved), every)
	}
	var refusedAt time.Time
	var wait time.Duration
	for n := 0; ; n++ {
		ok, w := allow(t, rb, "k")
		if !ok {
			refusedAt, wait = time.Now(), w
			break
		}
		if n > 2*burst {
			t.Fatalf("process b passed %d requests of a bucket of %d", n, burst)
		}
	}
	ok, _ := allow(t, ra, "k")
	if ok && time.Since(refusedAt) < wait {
		t.Fatal("process a passed a request its lapsed block held, after process b emptied the bucket")
	}
}

// TestShared_ABurstOfRequestsOfOneKeyTakesFewStatements: a key's requests
// are reserved in blocks that double while they are used up, to an
// eighth of the burst: 300 requests one after another cost 9 statements
// and 400 at once a few, where each cost one; the row counts what the
// process reserved, so that other processes count it; and a request the
// block holds passes while the row is locked (no statement).
func TestShared_ABurstOfRequestsOfOneKeyTakesFewStatements(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	store := dbtest.OpenURL(t, url, db.Options{})
	shared := store.Limits().(*limits.Shared)
	const every = time.Hour
	r := shared.Rate("burst", 800, every)
	for i := range 300 {
		if ok, _ := allow(t, r, "a"); !ok {
			t.Fatalf("request %d of 300 of a burst of 800 refused", i)
		}
	}
	// Blocks of 1, 2, 4 … 64, then 100: 327 requests in 9 statements.
	if n := shared.BlockStatements(); n > 9 {
		t.Errorf("300 requests one after another made %d statements, want 9", n)
	}
	admin := openAdmin(t, url)
	var charged int64
	if err := admin.QueryRow(`SELECT (tat - (extract(epoch FROM now()) * 1000000)::bigint) / $1 FROM limit_buckets WHERE key = 'burst:a'`, every.Microseconds()).Scan(&charged); err != nil {
		t.Fatal(err)
	}
	if charged < 300 || charged > 300+100 {
		t.Fatalf("the bucket counts %d requests spent, want the 300 and at most a block of 100 more", charged)
	}
	var ok bool
	whileRowLocked(t, admin, "limit_buckets", "burst:a", func() { ok, _ = allow(t, r, "a") })
	if !ok {
		t.Fatal("a request its block held was refused while the row was locked")
	}

	before := shared.BlockStatements()
	const burst = 400
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			if ok, _, err := r.Allow(ctx, "b"); err != nil || !ok {
				t.Errorf("request %d of %d at once: %v, %v", i, burst, ok, err)
			}
		})
	}
	close(start)
	wg.Wait()
	statements := shared.BlockStatements() - before
	// Blocks of what waits, up to 100: about burst / 100, and the first.
	if statements > 12 {
		t.Errorf("%d requests at once made %d statements, want at most 12", burst, statements)
	}
	t.Logf("300 requests one after another: %d statements; %d at once: %d", before, burst, statements)
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

// TestShared_SlotsHoldAcrossProcesses: 32 slots of an account (blocks of
// 4) taken by two processes, 24 requests at a time each, never more than
// 32 at once; and slots one process gives back (after its linger) are
// taken by the other.
func TestShared_SlotsHoldAcrossProcesses(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	a := dbtest.OpenURL(t, url, db.Options{LimitLinger: 20 * time.Millisecond})
	b := dbtest.OpenURL(t, url, db.Options{LimitLinger: 20 * time.Millisecond})
	slots := []arbiter.SlotLimit{a.Limits().Slots("mcp", 32), b.Limits().Slots("mcp", 32)}
	var held, most, taken atomic.Int64
	var takenBy [2]atomic.Int64
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() {
			for range 20 {
				release, ok, err := slots[i%2].Acquire(ctx, "acct_1")
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				taken.Add(1)
				takenBy[i%2].Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond) // the call
				held.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if most.Load() > 32 || taken.Load() < 32 || takenBy[0].Load() == 0 || takenBy[1].Load() == 0 {
		t.Fatalf("at most %d held at once (%d taken in all, %d by a, %d by b); want at most 32, 32 taken, some by each", most.Load(), taken.Load(), takenBy[0].Load(), takenBy[1].Load())
	}
	t.Logf("%d of 960 calls taken (%d by a, %d by b), at most %d at once", taken.Load(), takenBy[0].Load(), takenBy[1].Load(), most.Load())
	admin := openAdmin(t, url)
	waitFor(t, "both processes give back their idle blocks", func() bool {
		return slotsHeld(t, admin, "mcp:acct_1", "") == 0
	})
	// b may refuse for a moment after it found the row full.
	var releases []func()
	waitFor(t, "process b takes a slot once a's are given back", func() bool {
		r, ok := acquire(t, slots[1], "acct_1")
		if ok {
			releases = append(releases, r)
		}
		return ok
	})
	for i := range 31 {
		r, ok := acquire(t, slots[1], "acct_1")
		if !ok {
			t.Fatalf("slot %d of 32 refused to process b after every slot was given back", i+2)
		}
		releases = append(releases, r)
	}
	if _, ok := acquire(t, slots[0], "acct_1"); ok {
		t.Fatal("a 33rd slot was taken by process a")
	}
	if _, ok := acquire(t, slots[1], "acct_1"); ok {
		t.Fatal("a 33rd slot was taken by process b")
	}
	for _, r := range releases[:4] {
		r()
	}
	waitFor(t, "process a takes the slots process b gave back", func() bool {
		_, ok := acquire(t, slots[0], "acct_1")
		return ok
	})
}

// TestShared_ARunOfSlotsOfOneKeyTakesFewStatements: a slot limit of 32
// (blocks of 4) reserves its slots in blocks: a thousand calls of one
// key, one after another, cost one statement, where a slot taken and
// given back one at a time cost two each; 32 calls at once cost a dozen;
// a call with a free slot in its process's block is taken while the row
// is locked (no statement); and the row holds what the process reserved,
// so that other processes count it.
func TestShared_ARunOfSlotsOfOneKeyTakesFewStatements(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	store := dbtest.OpenURL(t, url, db.Options{LimitLinger: time.Hour})
	shared := store.Limits().(*limits.Shared)
	s := shared.Slots("mcp-calls", 32)
	admin := openAdmin(t, url)
	for i := range 1000 {
		release, ok := acquire(t, s, "acct_1")
		if !ok {
			t.Fatalf("call %d of a run, one at a time, refused", i)
		}
		release()
	}
	if n := shared.BlockStatements(); n > 1 {
		t.Errorf("1,000 calls of one key, one after another, made %d statements, want 1", n)
	}
	if held := slotsHeld(t, admin, "mcp-calls:acct_1", shared.ProcessID()); held != 1 {
		t.Fatalf("the row holds %d of the process's slots after a run one at a time, want its block of 1", held)
	}

	before := shared.BlockStatements()
	const calls = 32
	releases := make([]func(), calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			release, ok, err := s.Acquire(ctx, "acct_1")
			if err != nil || !ok {
				t.Errorf("call %d of %d at once: %v, %v", i, calls, ok, err)
				return
			}
			releases[i] = release
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	burst := shared.BlockStatements() - before
	// Blocks of 1, 2, 4, then 4 at a time: about 2 + 31 / 4.
	if burst > 12 {
		t.Errorf("%d calls at once made %d statements, want at most 12", calls, burst)
	}
	if held := slotsHeld(t, admin, "mcp-calls:acct_1", ""); held != calls {
		t.Fatalf("%d calls hold %d slots of the row", calls, held)
	}
	if _, ok := acquire(t, s, "acct_1"); ok {
		t.Fatal("a 33rd call of a bound of 32 was taken")
	}
	// A call that finds a free slot in the block makes no statement:
	// it is taken while another transaction locks the row.
	releases[0]()
	var release func()
	var ok bool
	whileRowLocked(t, admin, "limit_slots", "mcp-calls:acct_1", func() { release, ok = acquire(t, s, "acct_1") })
	if !ok {
		t.Fatal("a call with a free slot in its block was refused while the row was locked")
	}
	releases[0] = release
	before = shared.BlockStatements()
	for _, release := range releases {
		release()
	}
	// Ending the calls gives back all but one block, in a few statements.
	waitFor(t, "the process gives back all but one block of its free slots", func() bool {
		return slotsHeld(t, admin, "mcp-calls:acct_1", "") <= 4
	})
	ended := shared.BlockStatements() - before
	if ended > 4 {
		t.Errorf("%d calls ending made %d statements, want at most 4", calls, ended)
	}
	t.Logf("1,000 calls one after another: 1 statement; %d at once: %d, and %d as they ended", calls, burst, ended)
}

// TestShared_SlotsOfAProcessThatEndedAreGivenBack: the slots of a
// process that ended without giving them back (kill -9) are freed once its
// heartbeat's lease has lapsed, and only its own.
func TestShared_SlotsOfAProcessThatEndedAreGivenBack(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	a := dbtest.OpenURL(t, url, db.Options{})
	b := dbtest.OpenURL(t, url, db.Options{LimitLinger: 20 * time.Millisecond})
	sa, sb := a.Limits().Slots("waiters", 3), b.Limits().Slots("waiters", 3)
	acquire(t, sa, "key_1")
	acquire(t, sa, "key_1")
	releaseB, _ := acquire(t, sb, "key_1")
	if _, ok := acquire(t, sb, "key_1"); ok {
		t.Fatal("a 4th slot was taken")
	}
	a.Close() // process a ends; its heartbeat stops, its slots stay held
	admin := openAdmin(t, url)
	shared := b.Limits().(*limits.Shared)
	if err := shared.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if held := slotsHeld(t, admin, "waiters:key_1", a.Limits().(*limits.Shared).ProcessID()); held != 2 {
		t.Fatalf("a live process's slots were given back before its lease lapsed: it holds %d of 2", held)
	}
	if _, ok := acquire(t, sb, "key_1"); ok {
		t.Fatal("a slot held by a process whose lease has not lapsed was taken")
	}
	// Its lease lapses (as 30 s without a beat would have it).
	res, err := admin.Exec(`UPDATE limit_processes SET expires_at = 0 WHERE process = $1`, a.Limits().(*limits.Shared).ProcessID())
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("lapse a's lease: %v rows, %v", n, err)
	}
	if err := shared.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// b may refuse for a moment after it found the row full.
	var r1 func()
	waitFor(t, "process b takes a slot once a's lease lapsed", func() bool {
		var ok bool
		r1, ok = acquire(t, sb, "key_1")
		return ok
	})
	r2, ok2 := acquire(t, sb, "key_1")
	if _, ok3 := acquire(t, sb, "key_1"); !ok2 || ok3 {
		t.Fatalf("after a's lease lapsed: %v %v; want its 2 slots back, and b's own still held", ok2, ok3)
	}
	releaseB()
	r1()
	r2()
	waitFor(t, "every slot is given back to the row once idle", func() bool {
		return slotsHeld(t, admin, "waiters:key_1", "") == 0
	})
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

// enterWait enters a wait of the key of account through w, and fails t
// on anything but an admission or a refusal; leave is nil when refused,
// and says names the bound that refused it.
func enterWait(t *testing.T, w arbiter.WaiterLimiter, account, key string) (leave func(), says string) {
	t.Helper()
	leave, err := w.EnterWait(ctx, account, key)
	switch {
	case err == nil:
		return leave, ""
	case arbiter.ErrorCode(err) != arbiter.ERATELIMIT:
		t.Fatalf("EnterWait(%s, %s): %v", account, key, err)
	}
	return nil, arbiter.ErrorMessage(err)
}

// TestWaiters_BoundAKeyAndAnAccountOnEachStore: on either store, a key's
// waits past its bound and an account's past its bound are refused, and
// a wait that ended makes room; on Postgres the waits hold the store's
// slots (one budget for the deployment), on SQLite this process's counts.
func TestWaiters_BoundAKeyAndAnAccountOnEachStore(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, l limits.Limits) {
		w := limits.Waiters(l, 2, 3)
		if _, inProcess := w.(*arbiter.WaiterCounts); inProcess == l.Shared() {
			t.Fatalf("waiters of limits shared=%v are %T", l.Shared(), w)
		}
		first, _ := enterWait(t, w, "acct_1", "key_1")
		enterWait(t, w, "acct_1", "key_1")
		if leave, says := enterWait(t, w, "acct_1", "key_1"); leave != nil || !strings.Contains(says, "API key are waiting for tasks at once (at most 2)") {
			t.Fatalf("a key's third wait of 2: admitted %v, %q", leave != nil, says)
		}
		enterWait(t, w, "acct_1", "key_2")
		if leave, says := enterWait(t, w, "acct_1", "key_3"); leave != nil || !strings.Contains(says, "account are waiting for tasks at once (at most 3)") {
			t.Fatalf("an account's fourth wait of 3: admitted %v, %q", leave != nil, says)
		}
		first()
		if leave, _ := enterWait(t, w, "acct_1", "key_1"); leave == nil {
			t.Fatal("no wait admitted once one ended")
		}
	})
}

// slotsHeld returns the slots of the limit row key that process holds
// (every process's, with process ""), read by admin.
func slotsHeld(t *testing.T, admin *sql.DB, key, process string) int {
	t.Helper()
	var held int
	err := admin.QueryRow(`SELECT coalesce(sum(CASE WHEN $2 = '' THEN held ELSE coalesce((holders ->> $2)::int, 0) END), 0)
FROM limit_slots WHERE key = $1`, key, process).Scan(&held)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// waitFor waits until cond holds, and fails t with what when it never
// does.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := testutil.Patience(t); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// openAdmin returns a connection to the schema of url, closed at the end
// of t.
func openAdmin(t *testing.T, url string) *sql.DB {
	t.Helper()
	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return admin
}

// TestShared_WaitersHoldAcrossProcesses: the waits of a key and of an
// account that two processes admit are bounded once, not once each; a
// wait one process ends makes room in the other (once it gives its block
// back); and 48 goroutines entering waits through both at once, 16 a key
// and 24 an account, never hold more than that together.
func TestShared_WaitersHoldAcrossProcesses(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	a := dbtest.OpenURL(t, url, db.Options{LimitLinger: 20 * time.Millisecond})
	b := dbtest.OpenURL(t, url, db.Options{LimitLinger: 20 * time.Millisecond})
	wa, wb := limits.Waiters(a.Limits(), 2, 3), limits.Waiters(b.Limits(), 2, 3)
	leaveA, _ := enterWait(t, wa, "acct_1", "key_1")
	enterWait(t, wb, "acct_1", "key_1")
	for _, w := range []arbiter.WaiterLimiter{wa, wb} {
		if leave, says := enterWait(t, w, "acct_1", "key_1"); leave != nil || !strings.Contains(says, "API key") {
			t.Fatalf("a key's third wait of 2 across two processes: admitted %v, %q", leave != nil, says)
		}
	}
	enterWait(t, wa, "acct_1", "key_2")
	if leave, says := enterWait(t, wb, "acct_1", "key_3"); leave != nil || !strings.Contains(says, "account") {
		t.Fatalf("an account's fourth wait of 3 across two processes: admitted %v, %q", leave != nil, says)
	}
	leaveA()
	leaveA()
	// Process a gives the slots back after its linger; b then admits.
	admin := openAdmin(t, url)
	waitFor(t, "process a gives back the key's slot of the wait that ended", func() bool {
		return slotsHeld(t, admin, "waiters-key:key_1", "") == 1
	})
	var leave func()
	waitFor(t, "process b admits a wait of the key once process a's ended", func() bool {
		leave, _ = enterWait(t, wb, "acct_1", "key_1")
		return leave != nil
	})

	wa, wb = limits.Waiters(a.Limits(), 16, 24), limits.Waiters(b.Limits(), 16, 24)
	var keyWaits [2]atomic.Int64
	var accountWaits, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() {
			for range 10 {
				k := i % 4 / 2 // two keys of one account, each through both processes
				leave, err := []arbiter.WaiterLimiter{wa, wb}[i%2].EnterWait(ctx, "acct_2", "key_"+strconv.Itoa(10+k))
				if err != nil {
					if arbiter.ErrorCode(err) != arbiter.ERATELIMIT {
						t.Error(err)
						return
					}
					continue
				}
				admitted.Add(1)
				if n := keyWaits[k].Add(1); n > 16 {
					t.Errorf("%d waits of a key at once, bound 16", n)
				}
				n := accountWaits.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond) // the wait
				keyWaits[k].Add(-1)
				accountWaits.Add(-1)
				leave()
			}
		})
	}
	wg.Wait()
	if most.Load() > 24 || admitted.Load() < 24 {
		t.Fatalf("at most %d waits of the account at once (%d admitted in all); want at most 24, and 24 admitted", most.Load(), admitted.Load())
	}
}

// TestShared_ABurstOfWaitsTakesFewStatements: 600 waits of one key
// entering at once cost a few dozen statements, not one (or two) each,
// and the key's and the account's rows hold what they take, so that
// other processes count them; as they end, the slots are given back in
// blocks too, and all of them once idle.
func TestShared_ABurstOfWaitsTakesFewStatements(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	store := dbtest.OpenURL(t, url, db.Options{LimitLinger: 50 * time.Millisecond})
	shared := store.Limits().(*limits.Shared)
	w := limits.Waiters(shared, 1000, 4000)
	const burst = 600
	leaves := make([]func(), burst)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			leave, err := w.EnterWait(ctx, "acct_1", "key_1")
			if err != nil {
				t.Errorf("wait %d: %v", i, err)
				return
			}
			leaves[i] = leave
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	admin := openAdmin(t, url)
	statements := shared.BlockStatements()
	// Blocks of the key grow to 125 slots, of the account to 500: each
	// row takes about log2(its block) + burst/block statements.
	if statements > 40 {
		t.Errorf("%d waits entering at once made %d statements, want at most 40", burst, statements)
	}
	key, account := slotsHeld(t, admin, "waiters-key:key_1", ""), slotsHeld(t, admin, "waiters-account:acct_1", "")
	if key < burst || key > burst+2*125 || account < burst || account > burst+2*500 {
		t.Fatalf("%d waits hold %d slots of their key's row and %d of their account's; want them all, and at most two blocks more", burst, key, account)
	}
	t.Logf("%d waits: %d statements; %d of the key's slots reserved, %d of the account's", burst, statements, key, account)
	for _, leave := range leaves {
		leave()
	}
	if ended := shared.BlockStatements() - statements; ended > 40 {
		t.Errorf("%d waits ending made %d statements, want at most 40", burst, ended)
	}
	waitFor(t, "the slots of the ended waits are given back", func() bool {
		return slotsHeld(t, admin, "waiters-key:key_1", "") == 0 && slotsHeld(t, admin, "waiters-account:acct_1", "") == 0
	})
}

// TestShared_ReservedSlotsComeBack: slots a process reserved and no
// longer uses come back to the other processes after its linger; those
// of a process that went silent (kill -9: no give-back) come back once
// its heartbeat's lease has lapsed, and only its own.
func TestShared_ReservedSlotsComeBack(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	a := dbtest.OpenURL(t, url, db.Options{LimitLinger: 20 * time.Millisecond})
	b := dbtest.OpenURL(t, url, db.Options{LimitLinger: time.Hour})
	admin := openAdmin(t, url)
	wa, wb := limits.Waiters(a.Limits(), 8, 100), limits.Waiters(b.Limits(), 8, 100)
	var leaves []func()
	for range 8 {
		leave, _ := enterWait(t, wa, "acct_1", "key_1")
		if leave == nil {
			t.Fatal("a wait of 8 refused")
		}
		leaves = append(leaves, leave)
	}
	if leave, _ := enterWait(t, wb, "acct_1", "key_1"); leave != nil {
		t.Fatal("process b admitted a 9th wait of a key bound to 8")
	}
	for _, leave := range leaves {
		leave()
	}
	waitFor(t, "process a gives back its idle block", func() bool {
		return slotsHeld(t, admin, "waiters-key:key_1", "") == 0
	})
	// b may refuse for a moment after it found the row full.
	leaves = nil
	waitFor(t, "process b admits a wait once a gave its slots back", func() bool {
		leave, _ := enterWait(t, wb, "acct_1", "key_1")
		leaves = append(leaves, leave)
		return leave != nil
	})
	leaves = leaves[len(leaves)-1:]
	for range 7 {
		leave, _ := enterWait(t, wb, "acct_1", "key_1")
		if leave == nil {
			t.Fatal("process b cannot take the slots process a gave back")
		}
		leaves = append(leaves, leave)
	}
	for _, leave := range leaves {
		leave()
	}

	// Process b now holds its slots for an hour unused; process c takes
	// three of a fresh key and dies without a word.
	c := dbtest.OpenURL(t, url, db.Options{LimitLinger: time.Hour})
	wc := limits.Waiters(c.Limits(), 8, 100)
	for range 3 {
		if leave, _ := enterWait(t, wc, "acct_2", "key_2"); leave == nil {
			t.Fatal("process c: a wait of 8 refused")
		}
	}
	cProcess := c.Limits().(*limits.Shared).ProcessID()
	held := slotsHeld(t, admin, "waiters-key:key_2", cProcess)
	if held < 3 {
		t.Fatalf("process c holds %d slots for its 3 waits", held)
	}
	c.Close() // gives back its free slots; those of its 3 waits stay held
	leaves = nil
	for {
		leave, _ := enterWait(t, wb, "acct_2", "key_2")
		if leave == nil {
			break
		}
		leaves = append(leaves, leave)
	}
	if len(leaves) != 5 {
		t.Fatalf("beside process c's 3 waits, process b admitted %d of a key bound to 8", len(leaves))
	}
	res, err := admin.Exec(`UPDATE limit_processes SET expires_at = 0 WHERE process = $1`, cProcess)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("lapse c's lease: %v rows, %v", n, err)
	}
	if err := b.Limits().(*limits.Shared).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := slotsHeld(t, admin, "waiters-key:key_2", cProcess); got != 0 {
		t.Fatalf("process c still holds %d slots after its lease lapsed", got)
	}
	// b may refuse for a moment after it found the row full.
	waitFor(t, "process b admits 3 more once c's lease lapsed", func() bool {
		if leave, _ := enterWait(t, wb, "acct_2", "key_2"); leave != nil {
			leaves = append(leaves, leave)
		}
		return len(leaves) == 8
	})
	if leave, _ := enterWait(t, wb, "acct_2", "key_2"); leave != nil {
		t.Fatal("process b admitted a 9th wait of a key bound to 8")
	}
}

// TestShared_WaitersOfAStoreThatDoesNotAnswer: a statement on a row
// another transaction locks, or to a database that does not answer at
// all, does not hold back a wait the process's block has a slot for; a
// wait that needs a statement is refused as the store's other limits are
// (EUNAVAILABLE, a 503 with Retry-After), holding nothing, and admitted
// again once the database answers.
func TestShared_WaitersOfAStoreThatDoesNotAnswer(t *testing.T) {
	// Not parallel, as db's TestStore_PostgresGone: a busy machine could
	// spend the store's timeout on the steps meant to pass.
	schema := dbtest.URL(t, db.Postgres)
	proxy, url := dbtest.ThroughProxy(t, schema)
	d := dbtest.OpenURL(t, url, db.Options{Timeout: 5 * time.Second, LimitLinger: time.Hour})
	w := limits.Waiters(d.Limits(), 16, 16)
	// Two waits reserve a block of two slots each of the key and the
	// account; one ends, and its slots stay the process's.
	first, _ := enterWait(t, w, "acct_1", "key_1")
	if leave, _ := enterWait(t, w, "acct_1", "key_1"); leave == nil || first == nil {
		t.Fatal("two waits of 16 refused")
	}
	first()

	admin := openAdmin(t, schema)
	var leave func()
	whileRowLocked(t, admin, "limit_slots", "waiters-account:acct_1", func() { leave, _ = enterWait(t, w, "acct_1", "key_1") })
	if leave == nil {
		t.Fatal("a wait with a free slot in the block was refused while its account's row was locked")
	}

	proxy.Freeze()
	defer proxy.Thaw()
	for _, key := range []string{"key_1", "key_2"} { // the block used up, and a key with none
		leave, err := w.EnterWait(ctx, "acct_1", key)
		var e *arbiter.Error
		if leave != nil || arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE || !errors.As(err, &e) || e.RetryAfter <= 0 {
			t.Fatalf("a wait of %s needing a statement while Postgres does not answer = %v, %v; want EUNAVAILABLE with a Retry-After", key, leave != nil, err)
		}
	}
	proxy.Thaw()
	waitFor(t, "a wait admitted once Postgres answers", func() bool {
		leave, err := w.EnterWait(ctx, "acct_1", "key_2")
		if err != nil && arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE {
			t.Fatal(err)
		}
		return leave != nil
	})
}
