package sqlitegate

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestWrites(t *testing.T) {
	for query, want := range map[string]bool{
		"SELECT id FROM tasks": false,
		"  \n\tselect 1":       false,
		"SELECT(1)":            false,
		"EXPLAIN QUERY PLAN SELECT id FROM tasks":                              false,
		"WITH RECURSIVE s(g) AS (SELECT 1) SELECT g FROM s":                    false,
		"WITH t AS (SELECT updated_at FROM x) SELECT * FROM t":                 false,
		"INSERT INTO tasks (id) VALUES (?)":                                    true,
		"UPDATE tasks SET status = 'pending' RETURNING id":                     true,
		"delete from sessions":                                                 true,
		"WITH d AS (SELECT id FROM tasks) UPDATE tasks SET x = 1 RETURNING id": true,
		"WITH d AS (SELECT 1) INSERT INTO t SELECT * FROM d":                   true,
		"REPLACE INTO t VALUES (1)":                                            true,
		"PRAGMA wal_checkpoint":                                                true,
		"-- a comment\nSELECT 1":                                               true, // unknown, so a write
		"":                                                                     true,
	} {
		if got := Writes(query); got != want {
			t.Errorf("writes(%q) = %v, want %v", query, got, want)
		}
	}
}

// waitFor waits until cond holds, at most 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}

// held reports whether someone holds g's turn.
func held(g *Gate) bool { return len(g.turn) == 1 }

func TestGate_TurnsGoInTheOrderTheyWereAskedFor(t *testing.T) {
	t.Parallel()
	g := New(time.Minute)
	if err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	const writers = 6
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range writers {
		wg.Go(func() {
			if err := g.enter(context.Background()); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			g.leave()
		})
		// The next writer comes once this one waits.
		waitFor(t, "the writer waits", func() bool { return g.Waiting() == int64(i+1) })
	}
	g.leave()
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
		t.Fatalf("writers wrote in the order %v, want %v", order, want)
	}
	if g.Waiting() != 0 || held(g) {
		t.Fatalf("after the writers: %d waiting, held %v", g.Waiting(), held(g))
	}
}

func TestGate_AWaitEndsAtTheTimeoutOrWithItsContext(t *testing.T) {
	t.Parallel()
	g := New(50 * time.Millisecond)
	if err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.enter(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past the timeout: %v, want context.DeadlineExceeded", err)
	}
	g.timeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.enter(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose context ended: %v, want context.Canceled", err)
	}
	if g.Waiting() != 0 {
		t.Fatalf("%d still waiting", g.Waiting())
	}
	g.leave()
	if err := g.enter(context.Background()); err != nil {
		t.Fatalf("the turn is free again: %v", err)
	}
}

// A fake SQLite driver: enough of a connection for the gate, recording
// nothing but whether the gate's turn was held when it ran a statement.
type (
	fakeConnector struct{ ran chan bool }
	fakeConn      struct {
		sqliteConn // nil: methods the gate does not call
		c          fakeConnector
		gate       *Gate
	}
	fakeStmt struct {
		sqliteStmt
		conn *fakeConn
	}
	fakeTx   struct{}
	fakeRows struct{}
)

func (c fakeConnector) Connect(context.Context) (driver.Conn, error) { return &fakeConn{c: c}, nil }
func (c fakeConnector) Driver() driver.Driver                        { return nil }

func (c *fakeConn) ran() { c.c.ran <- held(c.gate) }
func (c *fakeConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	c.ran()
	return driver.RowsAffected(1), nil
}
func (c *fakeConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	c.ran()
	return fakeRows{}, nil
}
func (c *fakeConn) PrepareContext(context.Context, string) (driver.Stmt, error) {
	return &fakeStmt{conn: c}, nil
}
func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return fakeTx{}, nil
}
func (c *fakeConn) Close() error { return nil }
func (s *fakeStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.conn.ExecContext(ctx, "", args)
}
func (s *fakeStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.conn.QueryContext(ctx, "", args)
}
func (fakeTx) Commit() error                    { return nil }
func (fakeTx) Rollback() error                  { return nil }
func (fakeRows) Columns() []string              { return nil }
func (fakeRows) Close() error                   { return nil }
func (fakeRows) Next(dest []driver.Value) error { return io.EOF }

// connect opens a gated connection over the fake driver; ran tells, for
// each statement the driver runs, whether a turn was held.
func connect(t *testing.T, g *Gate) (conn *gatedConn, ran chan bool) {
	t.Helper()
	ran = make(chan bool, 1)
	c, err := g.Connector(fakeConnector{ran: ran}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conn = c.(*gatedConn)
	conn.sqliteConn.(*fakeConn).gate = g
	return conn, ran
}

func TestConn_AWriteRunsInATurnAndAReadWithoutOne(t *testing.T) {
	t.Parallel()
	g := New(time.Minute)
	conn, ran := connect(t, g)
	ctx := context.Background()

	if _, err := conn.ExecContext(ctx, "UPDATE tasks SET x = 1", nil); err != nil || !<-ran {
		t.Fatalf("an update ran without the turn (%v)", err)
	}
	if held(g) {
		t.Fatal("the update kept the turn")
	}
	rows, err := conn.QueryContext(ctx, "SELECT 1", nil)
	if err != nil || <-ran {
		t.Fatalf("a select took the turn (%v)", err)
	}
	rows.Close()

	// A query that writes keeps the turn until its rows are closed.
	rows, err = conn.QueryContext(ctx, "INSERT INTO t VALUES (1) RETURNING id", nil)
	if err != nil || !<-ran {
		t.Fatalf("an insert ran without the turn (%v)", err)
	}
	if !held(g) {
		t.Fatal("the insert's open rows gave back the turn")
	}
	rows.Close()
	rows.Close() // a second close gives back nothing
	if held(g) || len(g.turn) != 0 {
		t.Fatal("closed rows kept the turn")
	}

	// A prepared statement that writes takes its turn each time it runs.
	stmt, err := conn.PrepareContext(ctx, "DELETE FROM sessions")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stmt.(driver.StmtExecContext).ExecContext(ctx, nil); err != nil || !<-ran {
			t.Fatalf("a prepared delete ran without the turn (%v)", err)
		}
	}
	if held(g) {
		t.Fatal("the prepared delete kept the turn")
	}
}

func TestConn_ATransactionHoldsTheTurnUntilItEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, end := range []string{"commit", "rollback", "close"} {
		g := New(time.Minute)
		conn, ran := connect(t, g)
		tx, err := conn.BeginTx(ctx, driver.TxOptions{})
		if err != nil || !held(g) {
			t.Fatalf("%s: a transaction began without the turn (%v)", end, err)
		}
		// Its statements run in its turn, without asking for another.
		if _, err := conn.ExecContext(ctx, "UPDATE tasks SET x = 1", nil); err != nil || !<-ran {
			t.Fatalf("%s: a statement in the transaction: %v", end, err)
		}
		switch end {
		case "commit":
			err = tx.Commit()
		case "rollback":
			err = tx.Rollback()
		case "close":
			err = conn.Close() // dropped in the middle
		}
		if err != nil || held(g) {
			t.Fatalf("%s: the turn was not given back (%v)", end, err)
		}
	}

	// A read-only transaction takes no turn.
	g := New(time.Minute)
	conn, _ := connect(t, g)
	tx, err := conn.BeginTx(ctx, driver.TxOptions{ReadOnly: true})
	if err != nil || held(g) {
		t.Fatalf("a read-only transaction took the turn (%v)", err)
	}
	tx.Commit()
}

func TestConn_AWriteThatFindsNoTurnDoesNotRun(t *testing.T) {
	t.Parallel()
	g := New(20 * time.Millisecond)
	conn, ran := connect(t, g)
	if err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "INSERT INTO t VALUES (1)", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write with no turn: %v, want context.DeadlineExceeded", err)
	}
	if _, err := conn.BeginTx(context.Background(), driver.TxOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a transaction with no turn: %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-ran:
		t.Fatal("the driver ran a statement that had no turn")
	default:
	}
}
