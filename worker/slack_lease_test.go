package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/slack"
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
// Lease: CallTimeout / 2: two in flight). The default holds the relation
// for the client's own timeout.
func TestSlackDeliverer_TheLeaseOutlastsACall(t *testing.T) {
	if worker.DefaultSlackLease < 2*slack.ClientTimeout {
		t.Fatalf("DefaultSlackLease %v is shorter than twice the Slack client's timeout %v", worker.DefaultSlackLease, slack.ClientTimeout)
	}
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
