// Package sqlitegate makes a SQLite store's writers take turns: a
// database/sql driver connector whose connections wait for a turn, first
// come first served, before they write.
package sqlitegate

import (
	"context"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// SQLite lets one connection write at a time. Left to itself, a connection
// that finds the write lock taken sleeps and tries again (busy_timeout, in
// steps growing to 100 ms), so under many writers a newcomer often takes
// the lock ahead of one that has waited a second, and a write's wait had
// no bound but the store's timeout: with 64 goroutines creating tasks, the
// slowest waited 1.6 s. The store's own connections therefore take turns
// in Go, first come first served (Gate), and meet busy_timeout only when
// another process writes to the same file.
//
// A turn is taken by every transaction but a read-only one (they begin
// IMMEDIATE, taking the write lock at once) and by every statement outside
// a transaction that may write (Writes). A statement inside a transaction
// runs in its transaction's turn; a query that writes keeps the turn until
// its rows are closed, as SQLite keeps the lock.

// Gate hands out turns to write, in the order they were asked for.
type Gate struct {
	// turn holds a token while a connection writes. Senders blocked on a
	// channel are woken in the order they came, and a newcomer finds the
	// buffer full while anyone waits, so turns go first come first served.
	turn    chan struct{}
	timeout time.Duration
	waiting atomic.Int64
}

// New returns a gate whose writers wait at most timeout for a turn.
func New(timeout time.Duration) *Gate {
	return &Gate{turn: make(chan struct{}, 1), timeout: timeout}
}

// Connector returns c with connections that take a turn of g for every
// write.
func (g *Gate) Connector(c driver.Connector) driver.Connector {
	return gatedConnector{Connector: c, gate: g}
}

// Waiting returns how many calls wait for a turn.
func (g *Gate) Waiting() int64 { return g.waiting.Load() }

// enter waits for a turn, at most until ctx ends or the store's timeout
// passes, which is then an error that wraps context.DeadlineExceeded (the
// store's EUNAVAILABLE).
func (g *Gate) enter(ctx context.Context) error {
	select {
	case g.turn <- struct{}{}:
		return nil
	default:
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case g.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("waited %s for a turn to write: %w", g.timeout, context.DeadlineExceeded)
	}
}

func (g *Gate) leave() { <-g.turn }

// writeWords finds a statement that writes inside a WITH.
var writeWords = regexp.MustCompile(`(?i)\b(INSERT|UPDATE|DELETE|REPLACE)\b`)

// Writes reports whether query may write: anything but a SELECT, an
// EXPLAIN, or a WITH that neither inserts, updates nor deletes. A query
// that starts otherwise, even with a comment, counts as a write.
func Writes(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n")
	word := q
	if end := strings.IndexFunc(q, func(r rune) bool { return !unicode.IsLetter(r) }); end >= 0 {
		word = q[:end]
	}
	switch strings.ToUpper(word) {
	case "SELECT", "EXPLAIN":
		return false
	case "WITH":
		return writeWords.MatchString(q)
	}
	return true
}

// gatedConnector opens SQLite connections that take turns to write.
type gatedConnector struct {
	driver.Connector
	gate *Gate
}

// sqliteConn is what the store needs of a modernc.org/sqlite connection:
// database/sql's context-aware methods, session reset and validation.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// sqliteStmt is what the store needs of a prepared statement.
type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

func (c gatedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("the SQLite driver's connection (%T) lacks a method the store needs", conn)
	}
	return &gatedConn{sqliteConn: sc, gate: c.gate}, nil
}

// gatedConn is a connection that takes a turn for each write. database/sql
// uses a connection from one goroutine at a time, so inTx needs no lock.
type gatedConn struct {
	sqliteConn
	gate *Gate
	inTx bool // the connection's transaction holds a turn
}

// turn takes a turn for a statement outside a transaction that writes;
// taken says whether it did, and so must give it back.
func (c *gatedConn) turn(ctx context.Context, write bool) (taken bool, err error) {
	if !write || c.inTx {
		return false, nil
	}
	if err := c.gate.enter(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// holding returns the rows of a query that took a turn (taken) as rows
// that give it back when closed; on err it gives it back at once. Other
// rows are returned as they are.
func (c *gatedConn) holding(rows driver.Rows, err error, taken bool) (driver.Rows, error) {
	switch {
	case !taken:
		return rows, err
	case err != nil:
		c.gate.leave()
		return nil, err
	}
	return &gatedRows{Rows: rows, gate: c.gate}, nil
}

func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		return c.sqliteConn.BeginTx(ctx, opts)
	}
	if err := c.gate.enter(ctx); err != nil {
		return nil, err
	}
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		c.gate.leave()
		return nil, err
	}
	c.inTx = true
	return &gatedTx{Tx: tx, conn: c}, nil
}

func (c *gatedConn) endTx() {
	if c.inTx {
		c.inTx = false
		c.gate.leave()
	}
}

// Close gives back the turn of a transaction that never ended, so that a
// connection dropped in the middle cannot stop every writer.
func (c *gatedConn) Close() error {
	c.endTx()
	return c.sqliteConn.Close()
}

func (c *gatedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	stmt, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	ss, ok := stmt.(sqliteStmt)
	if !ok {
		stmt.Close()
		return nil, fmt.Errorf("the SQLite driver's statement (%T) lacks a method the store needs", stmt)
	}
	return &gatedStmt{sqliteStmt: ss, conn: c, write: Writes(query)}, nil
}

func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	taken, err := c.turn(ctx, Writes(query))
	if err != nil {
		return nil, err
	}
	if taken {
		defer c.gate.leave()
	}
	return c.sqliteConn.ExecContext(ctx, query, args)
}

func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	taken, err := c.turn(ctx, Writes(query))
	if err != nil {
		return nil, err
	}
	rows, err := c.sqliteConn.QueryContext(ctx, query, args)
	return c.holding(rows, err, taken)
}

type gatedTx struct {
	driver.Tx
	conn *gatedConn
}

func (t *gatedTx) Commit() error {
	defer t.conn.endTx()
	return t.Tx.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.conn.endTx()
	return t.Tx.Rollback()
}

// gatedStmt is a prepared statement that takes a turn when it writes
// outside a transaction. database/sql calls the context-aware methods
// only.
type gatedStmt struct {
	sqliteStmt
	conn  *gatedConn
	write bool
}

func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	taken, err := s.conn.turn(ctx, s.write)
	if err != nil {
		return nil, err
	}
	if taken {
		defer s.conn.gate.leave()
	}
	return s.sqliteStmt.ExecContext(ctx, args)
}

func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	taken, err := s.conn.turn(ctx, s.write)
	if err != nil {
		return nil, err
	}
	rows, err := s.sqliteStmt.QueryContext(ctx, args)
	return s.conn.holding(rows, err, taken)
}

// gatedRows gives back its query's turn when closed.
type gatedRows struct {
	driver.Rows
	gate *Gate
	once sync.Once
}

func (r *gatedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.gate.leave)
	return err
}
