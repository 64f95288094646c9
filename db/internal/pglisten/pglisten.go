// Package pglisten keeps one Postgres LISTEN connection for a process and
// hands what it hears to the store, which fans it out to its waiters; and
// sends a process's coalesced notifications (Sender). The shape follows
// River's notifier (riverqueue/river internal/notifier). The package holds
// no SQL but LISTEN, which pq's listener sends.
package pglisten

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter/db/internal/dial"
)

// Ping is how often the listener checks its idle connection, so a
// connection that died silently is noticed and replaced: an empty query,
// whose answer is the connection's read at least every Ping.
const Ping = 2 * time.Second

// ReadTimeout bounds the wait for anything to read on the listener's
// connection: with a ping every Ping, a connection that reads nothing
// for this long is dead (a primary whose machine vanished, a network
// that drops everything silently) and is replaced, instead of waiting
// for the operating system to give up on it (minutes). Three pings.
const ReadTimeout = 3 * Ping

// MaxReconnect is the longest wait between two attempts to connect
// again (from 0.1 s, doubling), so that long-polls after a failover are
// answered within a few seconds of the promotion.
const MaxReconnect = 2 * time.Second

// Listener holds one LISTEN connection to a channel, opened at Start and
// kept, reconnecting, until Close.
type Listener struct {
	url, channel string
	log          *slog.Logger
	// name is how the log speaks of the listener.
	name string
	// notify receives each notification's payload.
	notify func(payload string)
	// lost is called once LISTEN is in force and after every reconnect:
	// whatever was sent before (or meanwhile) never arrives.
	lost func()

	run background
}

// New returns a listener of channel on the Postgres database at url that
// is not connected yet. notify gets each payload heard; lost is called
// when LISTEN takes effect and after every reconnect, since notifications
// sent meanwhile are lost. name is how the log speaks of it.
func New(url, channel, name string, log *slog.Logger, notify func(payload string), lost func()) *Listener {
	return &Listener{url: url, channel: channel, name: name, log: log, notify: notify, lost: lost}
}

// Start opens the connection, the first time it is called before Close;
// later calls do nothing. It does not wait for LISTEN to take effect
// (lost says when it has).
func (l *Listener) Start() { l.run.start(l.start) }

func (l *Listener) start(ctx context.Context, done chan<- struct{}) {
	log, name := l.log, l.name
	pl := pq.NewDialListener(dial.Dialer{Wrap: withReadTimeout}, l.url, 100*time.Millisecond, MaxReconnect, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventDisconnected:
			log.Warn(name+" lost its connection; reconnecting", "error", errString(err))
		case pq.ListenerEventConnectionAttemptFailed:
			log.Warn(name+" could not connect", "error", errString(err))
		case pq.ListenerEventReconnected:
			log.Info(name + " reconnected")
		}
	})
	go func() {
		// Listen returns once LISTEN is in force; notifications sent
		// before then were missed.
		if err := pl.Listen(l.channel); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error(name, "error", err.Error())
			return
		}
		l.lost()
	}()
	go func() {
		defer close(done)
		ping := time.NewTicker(Ping)
		defer ping.Stop()
		var pinging atomic.Bool // one ping at a time
		for {
			select {
			case <-ctx.Done():
				_ = pl.Close()
				return
			case n, ok := <-pl.Notify:
				switch {
				case !ok:
					return
				case n == nil:
					// Reconnected: whatever was sent meanwhile is lost.
					l.lost()
				default:
					l.notify(n.Extra)
				}
			case <-ping.C:
				if pinging.CompareAndSwap(false, true) {
					go func() {
						defer pinging.Store(false)
						_ = pl.Ping()
					}()
				}
			}
		}
	}()
}

// deadlineConn is a connection whose every read gives up after
// ReadTimeout, or at the deadline the driver set (connect_timeout's, for
// the start-up), whichever comes first; the listener's pings make
// something to read sooner on a connection that is alive.
type deadlineConn struct {
	net.Conn
	until atomic.Int64 // the driver's read deadline, in Unix nanoseconds; 0 for none
}

// withReadTimeout wraps each of the listener's connections, so that a
// read waiting longer than ReadTimeout fails.
func withReadTimeout(c net.Conn) net.Conn { return &deadlineConn{Conn: c} }

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.keep(t)
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.keep(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) keep(t time.Time) {
	if t.IsZero() {
		c.until.Store(0)
	} else {
		c.until.Store(t.UnixNano())
	}
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	deadline := time.Now().Add(ReadTimeout)
	if until := c.until.Load(); until != 0 && until < deadline.UnixNano() {
		deadline = time.Unix(0, until)
	}
	if err := c.Conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Close closes the connection, if it opened, and waits for the listener
// to stop; no Start after it opens one.
func (l *Listener) Close() { l.run.close() }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Sender sends a process's notifications of one kind: Kick asks for one
// and never blocks; send runs at most one at a time and at most once per
// gap, so the kicks in between share one notification.
type Sender struct {
	send func(ctx context.Context) error
	gap  time.Duration
	// failed is told of a send that failed while the sender ran.
	failed func(err error)

	kick chan struct{} // set when the sender starts
	run  background
}

// NewSender returns a sender that calls send at most once per gap, and
// failed with each error send returns before Close.
func NewSender(gap time.Duration, send func(ctx context.Context) error, failed func(err error)) *Sender {
	return &Sender{send: send, gap: gap, failed: failed}
}

// Kick asks for a notification; the first Kick starts the sender, which
// runs until Close.
func (s *Sender) Kick() {
	s.run.start(s.start)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Sender) start(ctx context.Context, done chan<- struct{}) {
	s.kick = make(chan struct{}, 1)
	go func() {
		defer close(done)
		gap := time.NewTimer(0)
		defer gap.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
			}
			if err := s.send(ctx); err != nil && ctx.Err() == nil {
				s.failed(err)
			}
			gap.Reset(s.gap)
			select {
			case <-ctx.Done():
				return
			case <-gap.C:
			}
		}
	}()
}

// Close stops the sender, if it started, and waits for it; a Kick after
// Close sends nothing.
func (s *Sender) Close() { s.run.close() }

// background is work that starts at most once and runs until close.
type background struct {
	once sync.Once
	mu   sync.Mutex
	stop context.CancelFunc // nil until the work starts
	done chan struct{}
}

// start calls run the first time it is called before close, with a context
// that close cancels; run starts the work, which closes done once it has
// stopped.
func (b *background) start(run func(ctx context.Context, done chan<- struct{})) {
	b.once.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.mu.Lock()
		b.stop, b.done = cancel, done
		b.mu.Unlock()
		run(ctx, done)
	})
}

// close cancels the work, if it started, and waits for it to stop; no
// work starts after it.
func (b *background) close() {
	b.once.Do(func() {})
	b.mu.Lock()
	stop, done := b.stop, b.done
	b.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}
