package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/worker"
)

// hangingSlack is a Slack whose posts never answer: each waits until its
// call's context ends. It counts the posts in flight at once.
type hangingSlack struct {
	mu       sync.Mutex
	inFlight int
	most     int // posts in flight at once, at most
	ended    int
}

func (h *hangingSlack) Post(ctx context.Context, _, _, _, _ string, _ slack.Message) (string, string, error) {
	h.mu.Lock()
	h.inFlight++
	h.most = max(h.most, h.inFlight)
	h.mu.Unlock()
	<-ctx.Done()
	h.mu.Lock()
	h.inFlight--
	h.ended++
	h.mu.Unlock()
	return "", "", ctx.Err()
}

func (h *hangingSlack) Update(context.Context, string, string, string, slack.Message) error {
	return nil
}

func (h *hangingSlack) FindPost(context.Context, string, string, time.Time, string) (string, error) {
	return "", nil // not in the channel: post again
}

func (h *hangingSlack) ChannelIDOf(context.Context, string, string) (string, error) {
	return "C0REFUNDS", nil
}

func (h *hangingSlack) counts() (most, ended int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.most, h.ended
}

// TestSlackDeliverer_TheLeaseOutlastsACall: the Slack lease is derived
// from the bound of an attempt's calls (twice it), so that no other
// process claims a message while its call is in flight: with two
// deliverers on one store and posts that never answer, each post is cut
// at the bound and tried again later, and never are two in flight at
// once. A lease shorter than the call lets the second deliverer post
// the message while the first's post is in flight (checked by hand with
// Lease: CallTimeout / 2: two in flight).
func TestSlackDeliverer_TheLeaseOutlastsACall(t *testing.T) {
	const callTimeout = 300 * time.Millisecond
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			hanging := &hangingSlack{}
			for range 2 {
				d := worker.NewSlackDeliverer(worker.SlackConfig{Store: store, Slack: hanging, CallTimeout: callTimeout,
					Pace: time.Millisecond, Poll: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
					DeskURL: func(id string) string { return "http://review.test/review/tasks/" + id }})
				runUntilStopped(t, "Slack deliverer", 30*time.Second, d.Run)
			}
			taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{})
			agentStep(t, store, taskID, arbiter.StatusHumanNeeded)
			waitUntil(t, "three posts cut at the bound", func() bool { _, ended := hanging.counts(); return ended >= 3 })
			if most, ended := hanging.counts(); most != 1 {
				t.Errorf("%d posts of the message were in flight at once (of %d), want one at a time", most, ended)
			}
		})
	}
}

// TestDeliverers_TheDefaultLeaseOutlastsTwoCalls: the Slack and Teams
// deliverers default their lease by one rule, which outlasts two calls
// (the attempt's, and as long again for the store's around it): for a
// CallTimeout set, and for the client's own timeout, where it is the
// exported default (DefaultSlackLease, DefaultTeamsLease).
func TestDeliverers_TheDefaultLeaseOutlastsTwoCalls(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	for _, c := range []struct {
		name                        string
		defaultLease, clientTimeout time.Duration
		lease                       func(callTimeout time.Duration) time.Duration
	}{
		{name: "Slack", defaultLease: worker.DefaultSlackLease, clientTimeout: slack.ClientTimeout,
			lease: func(callTimeout time.Duration) time.Duration {
				return worker.NewSlackDeliverer(worker.SlackConfig{Store: store, CallTimeout: callTimeout}).Lease()
			}},
		{name: "Teams", defaultLease: worker.DefaultTeamsLease, clientTimeout: teams.ClientTimeout,
			lease: func(callTimeout time.Duration) time.Duration {
				return worker.NewTeamsDeliverer(worker.TeamsConfig{Store: store, CallTimeout: callTimeout}).Lease()
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.lease(0); got != c.defaultLease {
				t.Errorf("the lease by default is %v, want the exported default %v", got, c.defaultLease)
			}
			for _, call := range []time.Duration{c.clientTimeout, 300 * time.Millisecond, time.Minute} {
				if got := c.lease(call); got < 2*call {
					t.Errorf("with calls bounded by %v the lease is %v, which does not outlast two calls", call, got)
				}
			}
		})
	}
}
