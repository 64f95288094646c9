package limits

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Shared keeps the limits in Postgres, in tables every process of the
// deployment reads and writes (db/migrations/postgres, "limits"):
//
//   - a rate limit's bucket is one row per key holding its theoretical
//     arrival time (GCRA, the token bucket as one timestamp): a
//     reservation of requests is one INSERT … ON CONFLICT DO UPDATE …
//     RETURNING, the row's lock ordering the processes' reservations,
//     which a process reserves in blocks under a burst (rate.go);
//   - a slot limit is one row per key holding the slots taken and how many
//     each process holds, so that the slots of a process that died are
//     given back once its heartbeat (limit_processes) lapses; a process
//     reserves them in blocks and hands them out in memory (blocks.go);
//   - a State is one row per key, changed under its lock.
//
// The tables are UNLOGGED: a limit's state is worth no write-ahead log,
// no flush at commit and no wait for a synchronous standby. A crash of
// the database or a failover empties them, which gives every bucket its
// burst back and every slot free once: a limit restarts, it never lets
// more through than it states.
//
// Time is the database's (statement_timestamp()), which every process
// agrees on. A key refused here is refused again, without a statement,
// until its retry time, so a client hammering an empty bucket costs the
// database nothing more.
type Shared struct {
	db          *sql.DB
	log         *slog.Logger
	timeout     time.Duration
	unavailable func(error) error
	// process names this process's slots (limit_processes).
	process string
	// linger is how long a block of slots (blocks.go) stays reserved
	// without a request.
	linger time.Duration

	refused refusals
	// beatAt is when this process's last heartbeat was written
	// (UnixNano); blockStatements counts the statements of blocks.
	beatAt          atomic.Int64
	blockStatements atomic.Int64

	mu      sync.Mutex
	running bool
	stop    chan struct{}
	done    sync.WaitGroup
	pools   map[poolName]*blockSlots
}

// poolName names a slot limit of a process: its name and its bound.
type poolName struct {
	name string
	max  int
}

// Options tune a Shared.
type Options struct {
	// Logger receives the heartbeat's failures (default slog.Default()).
	Logger *slog.Logger
	// Timeout bounds each statement, and the release of a slot, which
	// runs without its caller's context (default 5 s).
	Timeout time.Duration
	// Unavailable turns a failure of the database into the error callers
	// get (the store's EUNAVAILABLE); nil leaves errors as they are.
	Unavailable func(error) error
	// Linger is how long a process keeps slots it reserved in a block
	// and does not use, without a request of their key, before it gives
	// them back (default 2 s).
	Linger time.Duration
}

// Slot-holder liveness: a process beats every heartbeatEvery, its slots
// stand for heartbeatLease after its last beat, and a bucket full for
// pruneAfter (it would be refilled anyway) is deleted.
const (
	heartbeatEvery = 5 * time.Second
	heartbeatLease = 30 * time.Second
	pruneAfter     = time.Hour
	defaultLinger  = 2 * time.Second
)

// NewShared returns the limits kept in the Postgres database of pool,
// whose schema has the limits' tables.
func NewShared(pool *sql.DB, opts Options) *Shared {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Unavailable == nil {
		opts.Unavailable = func(err error) error { return err }
	}
	if opts.Linger <= 0 {
		opts.Linger = defaultLinger
	}
	return &Shared{db: pool, log: opts.Logger, timeout: opts.Timeout, unavailable: opts.Unavailable,
		process: arbiter.NewID("proc_", 12), linger: opts.Linger, refused: refusals{until: map[string]time.Time{}},
		pools: map[poolName]*blockSlots{}}
}

// Shared implements Limits: the limits hold across processes.
func (s *Shared) Shared() bool { return true }

// Close stops the heartbeat of this process's slots and gives back the
// slots its blocks hold free; the slots its requests still hold are given
// back by the other processes once its lease lapses.
func (s *Shared) Close() {
	s.mu.Lock()
	running := s.running
	s.running = false
	s.mu.Unlock()
	if running {
		close(s.stop)
		s.done.Wait()
		for _, l := range s.blockPools() {
			l.giveBackIdle(0)
		}
	}
}

// Rate implements Limits with requests this process reserves in blocks
// (sharedRate): a request that finds one of its key's reserved in the
// process's block passes without a statement.
func (s *Shared) Rate(name string, burst int, every time.Duration) arbiter.RateLimit {
	r := &sharedRate{s: s, name: name, burst: int64(max(burst, 1)), every: max(every.Microseconds(), 1), keys: map[string]*tokens{}}
	if every >= minBlockEvery {
		r.maxBlock = r.burst / blockFraction
	}
	r.maxBlock = max(r.maxBlock, 1)
	return r
}

// Slots implements Limits with slots this process reserves in blocks
// (blockSlots): a request that finds a slot of its key free in the
// process's block takes it without a statement.
func (s *Shared) Slots(name string, max int) arbiter.SlotLimit {
	return s.blocks(name, max)
}

// call runs fn with the statement timeout and maps the database's
// failures.
func (s *Shared) call(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return s.unavailable(err)
	}
	return nil
}

// nowMicros is the database's time in microseconds since the epoch.
const nowMicros = `(extract(epoch FROM statement_timestamp()) * 1000000)::bigint`

// The heartbeat statements. A process's beat keeps its slots for
// heartbeatLease; reapSQL deletes the processes whose lease lapsed;
// deadHoldersSQL finds the slot rows that name a process with no lease,
// and dropHoldersSQL gives back those processes' slots of one row.
const (
	beatSQL = `INSERT INTO limit_processes (process, expires_at) VALUES ($1, ` + nowMicros + ` + $2)
ON CONFLICT (process) DO UPDATE SET expires_at = excluded.expires_at
RETURNING xmax = 0`
	reapSQL        = `DELETE FROM limit_processes WHERE expires_at < ` + nowMicros
	deadHoldersSQL = `SELECT s.key, array_agg(h.process) FROM limit_slots s
CROSS JOIN LATERAL jsonb_object_keys(s.holders) AS h(process)
WHERE NOT EXISTS (SELECT 1 FROM limit_processes p WHERE p.process = h.process)
GROUP BY s.key`
	dropHoldersSQL = `UPDATE limit_slots s SET
	held = s.held - (SELECT coalesce(sum((s.holders ->> p)::int), 0) FROM unnest($2::text[]) AS p),
	holders = s.holders - $2::text[]
WHERE s.key = $1`
	pruneBucketsSQL = `DELETE FROM limit_buckets WHERE tat < ` + nowMicros + ` - $1`
	pruneSlotsSQL   = `DELETE FROM limit_slots WHERE held = 0`
)

// start registers this process as a holder of slots, the first time,
// and starts its heartbeat.
func (s *Shared) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	if _, err := s.beat(ctx); err != nil {
		return err
	}
	s.running, s.stop = true, make(chan struct{})
	s.done.Add(2)
	go s.heartbeat(s.stop, s.done.Done)
	go s.lingerLoop(s.stop, s.done.Done)
	return nil
}

// beat extends this process's lease on its slots, and reports whether it
// had none: the process had lost its lease (its slots given back by
// another process's sweep), or the database had forgotten it (a crash or
// a failover empties the limits' tables).
func (s *Shared) beat(ctx context.Context) (lost bool, err error) {
	err = s.call(ctx, func(ctx context.Context) error {
		if err := s.db.QueryRowContext(ctx, beatSQL, s.process, heartbeatLease.Microseconds()).Scan(&lost); err != nil {
			return fmt.Errorf("limits heartbeat: %w", err)
		}
		return nil
	})
	if err == nil {
		s.beatAt.Store(time.Now().UnixNano())
	}
	return lost, err
}

// renew beats when this process's lease may have lapsed, and forgets what
// its blocks reserved when it had: the slots its requests hold are then
// reserved again before more are handed out.
func (s *Shared) renew(ctx context.Context) error {
	if s.leaseHeld() {
		return nil
	}
	lost, err := s.beat(ctx)
	if lost {
		s.forgetReservations()
	}
	return err
}

// forgetReservations marks every block as reserving nothing, for a
// process whose holdings the database no longer has.
func (s *Shared) forgetReservations() {
	for _, l := range s.blockPools() {
		l.mu.Lock()
		for _, b := range l.keys {
			if b.busy == nil {
				b.reserved = 0
			}
		}
		l.mu.Unlock()
	}
}

// heartbeat beats every heartbeatEvery until stop closes, and each time
// gives back the slots of processes whose lease lapsed, and prunes what
// is kept for nothing.
func (s *Shared) heartbeat(stop <-chan struct{}, done func()) {
	defer done()
	everyUntil(stop, heartbeatEvery, func() {
		ctx := context.Background()
		lost, err := s.beat(ctx)
		if lost {
			s.forgetReservations()
		}
		if err != nil {
			s.log.Warn("limits heartbeat", "error", err.Error())
			return
		}
		if err := s.Sweep(ctx); err != nil {
			s.log.Warn("limits sweep", "error", err.Error())
		}
	})
}

// Sweep gives back the slots of processes whose heartbeat lapsed and
// deletes full buckets and empty slot rows. Each process that holds slots
// sweeps every few seconds; tests call it.
func (s *Shared) Sweep(ctx context.Context) error {
	return s.call(ctx, func(ctx context.Context) error {
		if _, err := s.db.ExecContext(ctx, reapSQL); err != nil {
			return fmt.Errorf("reap processes: %w", err)
		}
		rows, err := s.db.QueryContext(ctx, deadHoldersSQL)
		if err != nil {
			return fmt.Errorf("find slots of ended processes: %w", err)
		}
		type dead struct {
			key       string
			processes string // a Postgres array
		}
		var found []dead
		for rows.Next() {
			var d dead
			if err := rows.Scan(&d.key, &d.processes); err != nil {
				rows.Close()
				return err
			}
			found = append(found, d)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, d := range found {
			if _, err := s.db.ExecContext(ctx, dropHoldersSQL, d.key, d.processes); err != nil {
				return fmt.Errorf("give back slots of ended processes: %w", err)
			}
		}
		if _, err := s.db.ExecContext(ctx, pruneBucketsSQL, pruneAfter.Microseconds()); err != nil {
			return fmt.Errorf("prune buckets: %w", err)
		}
		if _, err := s.db.ExecContext(ctx, pruneSlotsSQL); err != nil {
			return fmt.Errorf("prune slots: %w", err)
		}
		return nil
	})
}

// Update implements State: the key's row in limit_states, locked by an
// upsert that returns its value, changed and committed.
func (s *Shared) Update(ctx context.Context, key string, fn func(value []byte, now time.Time) ([]byte, error)) error {
	return s.call(ctx, func(ctx context.Context) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var value string
		var now int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO limit_states AS s (key, value) VALUES ($1, '')
ON CONFLICT (key) DO UPDATE SET value = s.value RETURNING value, `+nowMicros, key).Scan(&value, &now); err != nil {
			return fmt.Errorf("lock state %s: %w", key, err)
		}
		var in []byte
		if value != "" {
			in = []byte(value)
		}
		out, err := fn(in, time.UnixMicro(now))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE limit_states SET value = $2 WHERE key = $1`, key, string(out)); err != nil {
			return fmt.Errorf("store state %s: %w", key, err)
		}
		return tx.Commit()
	})
}

// maxRefusals bounds the refusals a process remembers; past it, the
// ones whose time has come are dropped, and if none has, all.
const maxRefusals = 100_000

// refusals remembers, by key, until when a bucket is known to be empty,
// so a refusal holds until then without asking the database. Only a
// request given back (Return, which only a refused sign-in step does)
// refills a bucket sooner: this process forgets the key's refusal then;
// another process that was refused it keeps refusing until its wait
// passes, stricter than the limit, never looser.
type refusals struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// left returns how long k is still known to be refused; 0 when not.
func (r *refusals) left(k string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.until[k]
	if !ok {
		return 0
	}
	left := time.Until(until)
	if left <= 0 {
		delete(r.until, k)
		return 0
	}
	return left
}

// set remembers that k is refused for wait.
func (r *refusals) set(k string, wait time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.until) >= maxRefusals {
		for key, until := range r.until {
			if !until.After(now) {
				delete(r.until, key)
			}
		}
		if len(r.until) >= maxRefusals {
			r.until = map[string]time.Time{}
		}
	}
	r.until[k] = now.Add(wait)
}

// clear forgets k's refusal: a request was given back.
func (r *refusals) clear(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.until, k)
}
