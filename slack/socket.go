package slack

import (
	"context"
	"errors"
	"log/slog"
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
	// Retry is the wait before connecting again after a failed attempt
	// (default 5s).
	Retry time.Duration
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

// RunConnection keeps one account's Socket Mode connection until ctx
// ends: it acknowledges each interaction at once and handles it after,
// and connects again whenever the socket drops or a connection fails.
func (s *SocketMode) RunConnection(ctx context.Context, conn *arbiter.SlackConnection) {
	retry := s.Retry
	if retry <= 0 {
		retry = 5 * time.Second
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	for ctx.Err() == nil {
		client := socketmode.New(s.Slack.API(conn.BotToken, conn.AppToken))
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- client.RunContext(cctx) }()
		err := s.serve(cctx, conn, client, done)
		cancel()
		if err != nil && ctx.Err() == nil {
			logger.Warn("Slack Socket Mode: connection failed", "account_id", conn.AccountID, "error", err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// serve answers the client's events until its run ends, and returns
// how it ended.
func (s *SocketMode) serve(ctx context.Context, conn *arbiter.SlackConnection, client *socketmode.Client, done <-chan error) error {
	for {
		select {
		case err := <-done:
			return err
		case evt := <-client.Events:
			switch evt.Type {
			case socketmode.EventTypeInteractive:
				cb, ok := evt.Data.(slackgo.InteractionCallback)
				if evt.Request != nil {
					client.Ack(*evt.Request)
				}
				if ok && cb.Team.ID == conn.TeamID {
					s.In.Dispatch(ctx, conn, &cb)
				}
			case socketmode.EventTypeInvalidAuth:
				return errInvalidAuth
			}
		}
	}
}
