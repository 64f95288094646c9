package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
	"modernc.org/sqlite"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/internal/dial"
	"github.com/arbiterhq/arbiter/db/internal/unprepared"
)

// DefaultTimeout bounds one call to the store when Options.Timeout is not
// set (ARBITER_DB_TIMEOUT).
const DefaultTimeout = 5 * time.Second

// A call to the store gets the store's timeout, however the database
// stalls:
//
//   - the call's context has the deadline, which bounds the wait for a
//     connection of the pool and cancels the statement running;
//   - Postgres cancels a statement that runs longer (statement_timeout),
//     waiting on a lock included;
//   - a Postgres connection whose answer does not come at all, because the
//     server or the network froze, fails its reads shortly after the
//     timeout and is dropped (answerConn);
//   - a SQLite write gives up waiting for its turn (db/internal/sqlitegate), and
//     for the write lock held by another process (busy_timeout).
//
// A call that ran out is EUNAVAILABLE, which the API answers as 503 with
// Retry-After. So is a call whose connection to Postgres was refused,
// reset or dropped (a server that is down or restarting): it was not
// stored, or, like a call that ran out, it may have been; either way the
// caller may try again with the same idempotency key.

// begin bounds a public read by the store's timeout. The function it
// returns, deferred with the call's error, releases the deadline and turns
// a store that did not answer in time into EUNAVAILABLE.
func (d *DB) begin(ctx context.Context) (context.Context, func(*error)) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	return ctx, func(err *error) {
		// A call cut off by its deadline may fail in the driver's words
		// ("bad connection"); the deadline says why.
		if *err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(*err, context.DeadlineExceeded) {
			*err = fmt.Errorf("%w: %w", *err, ctx.Err())
		}
		cancel()
		*err = d.unavailable(*err)
	}
}

// beginWrite is begin for a call that writes what callers gave: its
// outcome also counts towards the health of writes (Health). Calls that
// may well change nothing, such as a claim on an empty queue or a
// heartbeat, use begin: they would vouch for writes they did not make.
func (d *DB) beginWrite(ctx context.Context) (context.Context, func(*error)) {
	ctx, end := d.begin(ctx)
	return ctx, func(err *error) {
		end(err)
		d.writes.record(*err, d.now())
	}
}

// unavailable returns err, wrapped in an EUNAVAILABLE error when it says
// that the database did not answer in time or could not be reached.
func (d *DB) unavailable(err error) error {
	if err == nil {
		return nil
	}
	var message string
	switch {
	case timedOut(err):
		message = "The database did not answer in time; try again shortly."
	case unreachable(err):
		message = "The database cannot be reached; try again shortly."
	default:
		return err
	}
	var e *arbiter.Error
	if errors.As(err, &e) && e.Code != arbiter.EINTERNAL {
		return err
	}
	return fmt.Errorf("%w: %w", &arbiter.Error{
		Code:       arbiter.EUNAVAILABLE,
		Message:    message,
		RetryAfter: d.timeout,
	}, err)
}

// timedOut reports whether err says the database did not answer in time:
// the call's deadline or its wait for a turn to write passed, Postgres
// cancelled the statement, a connection's answer did not come, or
// SQLite's wait for the write lock ran out.
func timedOut(err error) bool {
	var (
		pqErr  *pq.Error
		netErr net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &pqErr):
		// query_canceled: statement_timeout, or the cancel of a call that
		// ran out; a read replica's cancel of a read that held back its
		// replay too long (max_standby_streaming_delay) is 40001 "conflict
		// with recovery", worth trying again as well.
		return pqErr.Code == "57014" || pqErr.Code == "40001" && strings.Contains(pqErr.Message, "conflict with recovery")
	case errors.As(err, &netErr):
		return netErr.Timeout()
	}
	return sqliteBusyError(err)
}

// unreachable reports whether err says the connection to Postgres failed:
// the server refused it or is not there (any network error), reset or
// closed it mid-call (the driver's bad connection, an unexpected end of
// its answers), or told it that it is shutting down, starting up or out of
// connections.
func unreachable(err error) bool {
	var (
		pqErr *pq.Error
		opErr *net.OpError
	)
	switch {
	case errors.As(err, &opErr),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF):
		return true
	case errors.As(err, &pqErr):
		switch pqErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300": // too_many_connections
			return true
		}
		return pqErr.Code.Class() == "08" // connection_exception
	}
	return false
}

// sqliteBusyError reports whether err is SQLite's SQLITE_BUSY: a lock that
// busy_timeout waited for in vain, or one it could not wait for.
func sqliteBusyError(err error) bool {
	return sqliteCode(err)&0xff == sqliteBusy
}

// sqliteCode returns the extended result code of an SQLite error in err's
// chain, or 0 when there is none.
func sqliteCode(err error) int {
	var sqliteErr *sqlite.Error
	if errors.As(err, &sqliteErr) {
		return sqliteErr.Code()
	}
	return 0
}

// SQLite result codes the store tells apart.
const (
	sqliteBusy                 = 5   // SQLITE_BUSY, the primary code of a lock wait that ran out
	sqliteConstraintForeignKey = 787 // SQLITE_CONSTRAINT_FOREIGNKEY
)

// postgresConnector returns the connector of the pool: statement_timeout
// set to timeout on every session (unless rawURL sets its own), and
// connections that give up on an answer shortly after it.
//
// Through a transaction-pooling pooler (pooled), whose server connections
// serve one transaction or statement at a time and accept few startup
// parameters (PgBouncer 1.18 refuses statement_timeout), statements are
// never prepared on the server, each runs in one round trip
// (binary_parameters), and statement_timeout is left to the pooler's
// connect_query or the database role (docs/scaling.md); the call's
// deadline and the connection's answer wait still bound each call.
func postgresConnector(rawURL string, timeout time.Duration, pooled bool) (driver.Connector, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("the database URL is not a URL: %w", err)
	}
	q := u.Query()
	switch {
	case pooled && !q.Has("binary_parameters"):
		q.Set("binary_parameters", "yes")
	case !pooled && !q.Has("statement_timeout"):
		q.Set("statement_timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	u.RawQuery = q.Encode()
	c, err := pq.NewConnector(u.String())
	if err != nil {
		return nil, err
	}
	// The server's own cancellation comes first; the margin lets its
	// answer arrive.
	c.Dialer(dial.Dialer{Wrap: answeredWithin(timeout + time.Second)})
	if pooled {
		return unprepared.Connector(c), nil
	}
	return c, nil
}

// answeredWithin wraps connections so that they give up on an answer
// after wait (answerConn).
func answeredWithin(wait time.Duration) func(net.Conn) net.Conn {
	return func(c net.Conn) net.Conn { return &answerConn{Conn: c, wait: wait} }
}

// answerConn is a connection to Postgres on which every request must be
// answered within wait: each write moves the read deadline to wait from
// then. The driver only reads for the answer to what it wrote, so an idle
// connection is never cut; one whose server froze fails with a timeout,
// and the driver drops it.
type answerConn struct {
	net.Conn
	wait time.Duration
}

// Write sends b and gives its answer until wait from now.
func (c *answerConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.wait)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// The store is unhealthy while its last failedWritesUnhealthy writes
// failed and the latest failure is younger than failedWritesWindow. Without
// writes for that long it is healthy again, and the next writes tell.
const (
	failedWritesUnhealthy = 3
	failedWritesWindow    = 30 * time.Second
)

// writeHealth counts the store's writes that failed in a row, for Health: a
// store that answers reads but refuses writes (a full disk, say) is not
// healthy.
type writeHealth struct {
	mu     sync.Mutex
	failed int
	last   error
	at     time.Time
}

// record counts the outcome at now of a write. Only the store's own
// failures count: an answer such as "not found" or "cap used up" is the
// store at work, and a caller who gave up says nothing about it.
func (h *writeHealth) record(err error, now time.Time) {
	if errors.Is(err, context.Canceled) {
		return
	}
	code := arbiter.ErrorCode(err)
	h.mu.Lock()
	defer h.mu.Unlock()
	if code == arbiter.EINTERNAL || code == arbiter.EUNAVAILABLE {
		h.failed, h.last, h.at = h.failed+1, err, now
		return
	}
	h.failed, h.last = 0, nil
}

// refused returns the error of the latest write when the store refuses
// writes at now, else nil.
func (h *writeHealth) refused(now time.Time) (failed int, last error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed < failedWritesUnhealthy || now.Sub(h.at) >= failedWritesWindow {
		return 0, nil
	}
	return h.failed, h.last
}
