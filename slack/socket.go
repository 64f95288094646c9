package slack

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/arbiterhq/arbiter"
)

// SocketMode keeps one Socket Mode connection open per account connected
// in that mode: the way an Arbiter behind a firewall hears clicks, with no
// public URL. It reads the connections from the store every Refresh, so
// one connected, replaced or disconnected on the settings page is picked
// up within it.
type SocketMode struct {
	Store   Store
	Slack   *Client
	In      *Interactions
	Logger  *slog.Logger
	Refresh time.Duration
	// Retry is the first wait before connecting again after a socket
	// dropped or a connection failed (default DefaultSocketRetry); each
	// failure in a row doubles it, up to MaxRetry (default
	// DefaultSocketMaxRetry), and every wait is drawn at random from its
	// upper half, so that sockets dropped together do not reconnect
	// together.
	Retry, MaxRetry time.Duration
}

// Defaults of SocketMode's reconnection.
const (
	DefaultSocketRetry    = time.Second
	DefaultSocketMaxRetry = 5 * time.Minute
	// socketStable is how long a socket must have stayed open for its
	// drop not to count as a failure: Slack refreshes sockets every few
	// hours, which is no reason to back off.
	socketStable = time.Minute
)

// reconnectDelay is the wait before the next connection after failures
// failed ones in a row (0 after a socket that stayed open): retry
// doubled per failure, capped at most, and scaled into its upper half by
// u in [0, 1), the jitter.
func reconnectDelay(failures int, retry, most time.Duration, u float64) time.Duration {
	d := most
	if failures < 32 && retry<<failures > 0 && retry<<failures < most {
		d = retry << failures
	}
	return d/2 + time.Duration(u*float64(d/2))
}

// Run keeps the connections until ctx ends.
func (s *SocketMode) Run(ctx context.Context) {
	if s.Refresh <= 0 {
		s.Refresh = time.Minute
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	type running struct {
		key    string
		cancel context.CancelFunc
		done   chan struct{}
	}
	open := map[string]*running{}
	defer func() {
		for _, r := range open {
			r.cancel()
			<-r.done
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		conns, err := s.Store.ListSlackConnections(ctx, arbiter.SlackModeSocket, "")
		if err != nil {
			s.Logger.Warn("Slack Socket Mode: list connections", "error", err.Error())
		} else {
			want := map[string]*arbiter.SlackConnection{}
			for _, c := range conns {
				want[c.AccountID] = c
			}
			for id, r := range open {
				if c, ok := want[id]; !ok || r.key != c.AppToken+c.BotToken {
					r.cancel()
					<-r.done
					delete(open, id)
				}
			}
			for id, c := range want {
				if open[id] != nil {
					continue
				}
				cctx, cancel := context.WithCancel(ctx)
				r := &running{key: c.AppToken + c.BotToken, cancel: cancel, done: make(chan struct{})}
				open[id] = r
				go func() {
					defer close(r.done)
					s.RunConnection(cctx, c)
				}()
			}
		}
		timer.Reset(s.Refresh)
	}
}

var errInvalidAuth = errors.New("Slack refused the app-level token (invalid_auth)")

// errReconnecting ends a client whose socket dropped: the next
// connection is RunConnection's, after its wait.
var errReconnecting = errors.New("the socket dropped")

// RunConnection keeps one account's Socket Mode connection until ctx
// ends: it acknowledges each interaction at once and handles it after,
// and connects again whenever the socket drops or a connection fails,
// after a wait that grows with the failures in a row (Retry, MaxRetry)
// and is drawn at random.
func (s *SocketMode) RunConnection(ctx context.Context, conn *arbiter.SlackConnection) {
	retry, most := s.Retry, s.MaxRetry
	if retry <= 0 {
		retry = DefaultSocketRetry
	}
	if most < retry {
		most = max(DefaultSocketMaxRetry, retry)
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	failures := 0
	for ctx.Err() == nil {
		client := socketmode.New(s.Slack.API(conn.BotToken, conn.AppToken))
		cctx, cancel := context.WithCancel(ctx)
		run := &socketRun{ended: make(chan struct{})}
		go func() {
			defer close(run.ended)
			run.err = client.RunContext(cctx)
		}()
		connectedAt, err := s.serve(cctx, conn, client, run)
		cancel()
		<-run.ended
		if err != nil && err != errReconnecting && ctx.Err() == nil {
			logger.Warn("Slack Socket Mode: connection failed", "account_id", conn.AccountID, "error", err.Error())
		}
		if !connectedAt.IsZero() && time.Since(connectedAt) >= socketStable {
			failures = 0
		}
		wait := reconnectDelay(failures, retry, most, rand.Float64())
		failures++
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// socketRun is a client's run: ended closes when it returns err.
type socketRun struct {
	ended chan struct{}
	err   error
}

// serve answers the client's events until its socket drops, a
// connection fails or its run ends, and returns when it connected (zero
// if it did not) and why it ended. The library would reconnect at once
// after a drop and back off without jitter after a failure: both are
// left to RunConnection.
func (s *SocketMode) serve(ctx context.Context, conn *arbiter.SlackConnection, client *socketmode.Client, run *socketRun) (connectedAt time.Time, err error) {
	for {
		select {
		case <-run.ended:
			err := run.err
			if err == nil {
				err = errReconnecting
			}
			return connectedAt, err
		case evt := <-client.Events:
			switch evt.Type {
			case socketmode.EventTypeConnected:
				connectedAt = time.Now()
			case socketmode.EventTypeConnecting:
				if !connectedAt.IsZero() {
					return connectedAt, errReconnecting
				}
			case socketmode.EventTypeConnectionError:
				if ev, ok := evt.Data.(*slackgo.ConnectionErrorEvent); ok && ev.ErrorObj != nil {
					return connectedAt, ev.ErrorObj
				}
				return connectedAt, errors.New("connection error")
			case socketmode.EventTypeInteractive:
				cb, ok := evt.Data.(slackgo.InteractionCallback)
				if evt.Request != nil {
					client.Ack(*evt.Request)
				}
				if ok && cb.Team.ID == conn.TeamID {
					s.In.Dispatch(ctx, conn, &cb)
				}
			case socketmode.EventTypeInvalidAuth:
				return connectedAt, errInvalidAuth
			}
		}
	}
}
