// Package unprepared wraps a database/sql driver so that "prepared"
// statements are never prepared on the server: each run of one sends its
// text and arguments as a one-shot statement. A transaction-pooling
// pooler (PgBouncer before 1.21, or with max_prepared_statements = 0)
// hands each transaction, or each statement outside one, a server
// connection of its choice, on which a statement prepared through another
// does not exist, or a different one of the same name does. The store's
// code keeps preparing its hot statements; only the wire changes.
//
// With lib/pq, a one-shot statement with arguments is one round trip only
// with binary_parameters=yes: otherwise the driver parses it and binds it
// after a Sync, between which the pooler may switch server connections.
package unprepared

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// Connector returns a connector of connections whose statements are run
// unprepared. The driver's connections must be context-aware and
// implement driver.QueryerContext and driver.ExecerContext.
func Connector(c driver.Connector) driver.Connector { return connector{c} }

type connector struct{ driver.Connector }

// conn is what a wrapped connection needs of the driver's: database/sql's
// context-aware methods, session reset, validation and the driver's own
// argument conversion.
type conn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cc, ok := dc.(conn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("the driver's connection (%T) lacks a method unprepared statements need", dc)
	}
	return &unpreparedConn{conn: cc}, nil
}

// unpreparedConn is a connection whose prepared statements are only their
// text.
type unpreparedConn struct{ conn }

func (c *unpreparedConn) Prepare(query string) (driver.Stmt, error) {
	return &stmt{conn: c.conn, query: query}, nil
}

func (c *unpreparedConn) PrepareContext(_ context.Context, query string) (driver.Stmt, error) {
	return &stmt{conn: c.conn, query: query}, nil
}

// stmt is a statement that runs its text one-shot on its connection each
// time.
type stmt struct {
	conn  conn
	query string
}

// Close has nothing to release on the server.
func (s *stmt) Close() error { return nil }

// NumInput is -1: the server counts the arguments when the statement runs.
func (s *stmt) NumInput() int { return -1 }

// CheckNamedValue converts arguments as the driver's connection does.
func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error { return s.conn.CheckNamedValue(nv) }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.conn.ExecContext(ctx, s.query, args)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.conn.QueryContext(ctx, s.query, args)
}

// named numbers positional arguments from 1, as database/sql does.
func named(args []driver.Value) []driver.NamedValue {
	n := make([]driver.NamedValue, len(args))
	for i, v := range args {
		n[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return n
}
