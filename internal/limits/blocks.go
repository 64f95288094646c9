package limits

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// blockSlots is a slot limit kept in limit_slots (Shared.Slots, and the
// waiters' bounds), whose slots a process reserves in blocks and hands
// out in memory: a request
// that finds a slot of its key free in the process's block takes it
// without a statement, and only a request that finds none makes one,
// which reserves a block for it and for every request of the key that
// comes while it runs. So a burst of n requests of one key costs about
// log₂(b) + n/b statements, b the largest block, where slots taken one by
// one cost 2n (each on the key's row, in turn): the waits of a busy key
// no longer queue on its row.
//
// The sum of the processes' reservations is the row's held, which never
// passes max, and a process never hands out more than it reserved, so the
// bound holds across processes. What a process reserved and does not use
// is given back when more than two blocks lie free (all but one), after
// linger without a request of the key (all), at Close, and, for a process
// that ended without, by the heartbeat's lapse, as any slot. The price is
// fairness: for up to linger a process may hold slots it does not use
// (at most one block, or two while its requests end), and another
// process's request that the bound had room for is refused meanwhile.
//
// When the database does not answer, a request still takes a slot its
// process holds free; one that needs a statement is refused with the
// store's error, as every request that waited on that statement.
type blockSlots struct {
	s        *Shared
	name     string
	max      int
	maxBlock int

	mu   sync.Mutex
	keys map[string]*block
}

// block is what one process holds of a key's slots.
type block struct {
	// reserved is how many of the key's slots the process holds in the
	// row, as its last statement left them; inUse how many of them
	// requests hold.
	reserved, inUse int
	// waiting counts the requests of the key waiting for a slot.
	waiting int
	// busy is the statement of the key running, nil when none: one at a
	// time, so that what the row returns is the process's whole holding.
	busy *blockStatement
	// changed is closed, and replaced, when a slot frees or a statement
	// ends.
	changed chan struct{}
	// fullUntil is until when the row is known to have no slot left: a
	// request refused then is refused without a statement.
	fullUntil time.Time
	// lastTaken is when a request last took a slot of the block.
	lastTaken time.Time
}

// blockStatement is a reservation or a give-back of a key's slots.
type blockStatement struct {
	done    chan struct{}
	reserve bool
	// full reports that a reservation found every slot of the row taken;
	// err that the database did not answer it.
	full bool
	err  error
}

// Block sizes: a block is what the key's requests hold and wait for (so
// blocks double under a burst), at most a blockFraction of the bound;
// fullFor is how long a row found full refuses without a statement.
const (
	blockFraction = 8
	fullFor       = 250 * time.Millisecond
)

// The block statements: $1 key, $2 the process, $3 how many slots, $4 the
// most slots. reserveSQL takes up to $3 of what the row has left and
// returns what the process holds then; no row when none was left.
// giveBackSQL gives back $3 of the process's slots (all it holds, at
// most) and returns what it holds then.
const (
	reserveSQL = `INSERT INTO limit_slots AS s (key, held, holders) VALUES ($1, $3::int, jsonb_build_object($2::text, $3::int))
ON CONFLICT (key) DO UPDATE SET held = s.held + least($3::int, $4::int - s.held),
	holders = jsonb_set(s.holders, ARRAY[$2::text], to_jsonb(coalesce((s.holders ->> $2::text)::int, 0) + least($3::int, $4::int - s.held)))
WHERE s.held < $4::int
RETURNING (holders ->> $2::text)::int`
	giveBackSQL = `UPDATE limit_slots SET held = held - least($3::int, (holders ->> $2::text)::int),
	holders = CASE WHEN (holders ->> $2::text)::int > $3::int
		THEN jsonb_set(holders, ARRAY[$2::text], to_jsonb((holders ->> $2::text)::int - $3::int))
		ELSE holders - $2::text END
WHERE key = $1 AND (holders ->> $2::text)::int > 0
RETURNING coalesce((holders ->> $2::text)::int, 0)`
)

// blocks returns the slot limit name, reserved in blocks, and has the
// process give back what it holds idle. A process has one of each name
// and bound, however often it is asked for: what a row returns is the
// process's whole holding of the key, which two limits of one name in a
// process would each take for their own.
func (s *Shared) blocks(name string, most int) *blockSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.pools[poolName{name, most}]; l != nil {
		return l
	}
	l := &blockSlots{s: s, name: name, max: most, maxBlock: max(1, (most+blockFraction-1)/blockFraction), keys: map[string]*block{}}
	s.pools[poolName{name, most}] = l
	return l
}

// Acquire implements arbiter.SlotLimit.
func (l *blockSlots) Acquire(ctx context.Context, key string) (func(), bool, error) {
	if l.max <= 0 {
		return nil, false, nil
	}
	if err := l.s.start(ctx); err != nil {
		return nil, false, err
	}
	if err := l.s.renew(ctx); err != nil {
		return nil, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.keys[key]
	if b == nil {
		b = &block{changed: make(chan struct{})}
		l.keys[key] = b
	}
	b.waiting++
	defer func() { b.waiting-- }()
	// seen is the reservation this request waited for: when it ended
	// without a slot for it, the request is refused with its outcome.
	var seen *blockStatement
	for {
		if b.inUse < b.reserved && l.s.leaseHeld() {
			b.inUse++
			b.lastTaken = time.Now()
			var once sync.Once
			return func() { once.Do(func() { l.release(key, b) }) }, true, nil
		}
		if seen != nil {
			select {
			case <-seen.done:
				switch {
				case seen.err != nil:
					return nil, false, seen.err
				case seen.full:
					return nil, false, nil
				}
				seen = nil // others took the block: reserve another
			default:
			}
		}
		if time.Now().Before(b.fullUntil) {
			return nil, false, nil
		}
		if b.busy == nil {
			seen = l.reserve(ctx, key, b)
			continue
		}
		if seen == nil && b.busy.reserve {
			seen = b.busy
		}
		if err := l.s.waitForChange(ctx, &l.mu, b.changed, l.name); err != nil {
			return nil, false, err
		}
	}
}

// waitForChange lets mu go until changed closes or ctx ends, and takes
// it again; a caller that left gets the error of the limit name that a
// statement which did not answer would give (the store's unavailable).
func (s *Shared) waitForChange(ctx context.Context, mu *sync.Mutex, changed <-chan struct{}, name string) error {
	mu.Unlock()
	defer mu.Lock()
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return s.unavailable(fmt.Errorf("limit %s: %w", name, ctx.Err()))
	}
}

// reserve reserves a block of key's slots for b, with l.mu held (and let
// go while the statement runs), and returns the finished statement.
func (l *blockSlots) reserve(ctx context.Context, key string, b *block) *blockStatement {
	st := &blockStatement{done: make(chan struct{}), reserve: true}
	b.busy = st
	// What the requests hold and wait for, less what is free: as many
	// again as hold slots, so blocks double under a burst.
	n := min(max(b.inUse-b.reserved+b.waiting, b.inUse, 1), l.maxBlock, l.max)
	l.mu.Unlock()
	var held int
	// A reservation serves every request that waits for it: the one that
	// made it leaving does not cancel it.
	err := l.s.call(context.WithoutCancel(ctx), func(ctx context.Context) error {
		l.s.blockStatements.Add(1)
		return l.s.db.QueryRowContext(ctx, reserveSQL, l.name+":"+key, l.s.process, n, l.max).Scan(&held)
	})
	l.mu.Lock()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		st.full = true
		b.fullUntil = time.Now().Add(fullFor)
	case err != nil:
		st.err = fmt.Errorf("limit %s: %w", l.name, err)
	default:
		b.reserved = held
	}
	l.finish(b, st)
	return st
}

// finish ends st, b's statement, with l.mu held.
func (l *blockSlots) finish(b *block, st *blockStatement) {
	b.busy = nil
	close(st.done)
	close(b.changed)
	b.changed = make(chan struct{})
}

// release gives back a slot a request of key held: to the block, and,
// when more than two blocks lie free, all but one to the row.
func (l *blockSlots) release(key string, b *block) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.inUse--
	close(b.changed)
	b.changed = make(chan struct{})
	if st, n := l.startGiveBackExcess(b); st != nil {
		go l.giveBackExcess(key, b, st, n)
	}
}

// startGiveBackExcess takes all but one block of b's free slots out of
// it, with l.mu held, when more than two blocks lie free and no
// statement of the key runs; it returns the give-back to run, nil when
// none.
func (l *blockSlots) startGiveBackExcess(b *block) (*blockStatement, int) {
	free := b.reserved - b.inUse
	if free <= 2*l.maxBlock || b.busy != nil {
		return nil, 0
	}
	return l.startGiveBack(b, free-l.maxBlock), free - l.maxBlock
}

// giveBackExcess gives back the n slots st took out of b, and again
// while more than two blocks lie free: the requests that ended while a
// give-back ran find it busy and leave their slots to it.
func (l *blockSlots) giveBackExcess(key string, b *block, st *blockStatement, n int) {
	for st != nil && l.giveBack(key, b, st, n) {
		l.mu.Lock()
		st, n = l.startGiveBackExcess(b)
		l.mu.Unlock()
	}
}

// startGiveBack takes n free slots out of b, with l.mu held, for
// giveBack to give back to the row.
func (l *blockSlots) startGiveBack(b *block, n int) *blockStatement {
	st := &blockStatement{done: make(chan struct{})}
	b.busy = st
	b.reserved -= n
	return st
}

// giveBack gives n of key's slots that startGiveBack took out of b back
// to the row, and reports whether the database answered. When it does
// not, they stay the process's, to be given back later.
func (l *blockSlots) giveBack(key string, b *block, st *blockStatement, n int) bool {
	var held int
	err := l.s.call(context.Background(), func(ctx context.Context) error {
		l.s.blockStatements.Add(1)
		err := l.s.db.QueryRowContext(ctx, giveBackSQL, l.name+":"+key, l.s.process, n).Scan(&held)
		if errors.Is(err, sql.ErrNoRows) {
			held, err = 0, nil // the process held none: its lease lapsed
		}
		return err
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.s.log.Warn("give back slots of a limit", "limit", l.name, "error", err.Error())
		b.reserved += n
	} else {
		b.reserved = held
	}
	l.finish(b, st)
	return err == nil
}

// giveBackIdle gives back the free slots of the keys none of whose
// requests took a slot for linger (all, with every = 0), and forgets the
// keys the process holds nothing of.
func (l *blockSlots) giveBackIdle(linger time.Duration) {
	type pending struct {
		key string
		b   *block
		st  *blockStatement
		n   int
	}
	var todo []pending
	now := time.Now()
	l.mu.Lock()
	for key, b := range l.keys {
		if b.busy != nil || b.waiting > 0 {
			continue
		}
		if free := b.reserved - b.inUse; free > 0 && now.Sub(b.lastTaken) >= linger {
			todo = append(todo, pending{key, b, l.startGiveBack(b, free), free})
			continue
		}
		if b.reserved <= 0 && b.inUse <= 0 {
			delete(l.keys, key)
		}
	}
	l.mu.Unlock()
	for _, p := range todo {
		l.giveBack(p.key, p.b, p.st, p.n)
	}
}

// lingerLoop gives back, every linger/2 until stop closes, what the
// process's blocks hold idle for linger.
func (s *Shared) lingerLoop(stop <-chan struct{}, done func()) {
	defer done()
	everyUntil(stop, max(s.linger/2, time.Millisecond), func() {
		for _, l := range s.blockPools() {
			l.giveBackIdle(s.linger)
		}
	})
}

// everyUntil calls fn every interval until stop closes.
func everyUntil(stop <-chan struct{}, interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		fn()
	}
}

// blockPools returns the slot limits reserved in blocks.
func (s *Shared) blockPools() []*blockSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	pools := make([]*blockSlots, 0, len(s.pools))
	for _, l := range s.pools {
		pools = append(pools, l)
	}
	return pools
}

// leaseHeld reports whether this process's heartbeat is recent enough
// that the slots it reserved are still its own: a process whose beats
// failed for most of the lease stops handing out what it holds, as the
// other processes will soon give it back.
func (s *Shared) leaseHeld() bool {
	return time.Since(time.Unix(0, s.beatAt.Load())) < heartbeatLease-2*heartbeatEvery
}
