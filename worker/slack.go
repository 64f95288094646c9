package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/slack"
)

// SlackSender is the part of Slack's Web API the Slack deliverer calls
// (slack.Client implements it).
type SlackSender interface {
	Post(ctx context.Context, botToken, channel string, msg slack.Message) (channelID, ts string, err error)
	Update(ctx context.Context, botToken, channelID, ts string, msg slack.Message) error
}

// SlackConfig configures a SlackDeliverer. Zero values take the defaults.
type SlackConfig struct {
	// Store is where messages are claimed from and attempts recorded
	// (required); its SlackMessagesQueued wakes the deliverer.
	Store arbiter.SlackDeliveryService
	// Slack sends the messages (required).
	Slack SlackSender
	// DeskURL returns the desk's page of a task, which every message
	// links to (required).
	DeskURL func(taskID string) string
	// Logger receives claim and record failures (default slog.Default()).
	Logger *slog.Logger
	// ID names this deliverer in leases (default sld_ + random).
	ID string
	// Pace is the least time between two messages to one channel
	// (default DefaultSlackPace: Slack allows about one a second).
	Pace time.Duration
	// Concurrency bounds the messages in flight, to all channels
	// (default DefaultSlackConcurrency); one channel has at most one.
	Concurrency int
	// Poll is the wait between claims when nothing is due (default 1s).
	Poll time.Duration
	// Lease is how long a claim holds (default DefaultWebhookLease).
	Lease time.Duration
	// Now is the clock of the pacing (default time.Now).
	Now func() time.Time
}

// Defaults of SlackConfig.
const (
	// DefaultSlackPace is the least time between two messages to a
	// channel.
	DefaultSlackPace = time.Second
	// DefaultSlackConcurrency bounds the messages in flight.
	DefaultSlackConcurrency = 8
)

// SlackDeliverer sends the Slack outbox: it claims due messages, posts a
// question or updates every posted copy of a task, and records each
// attempt. It works several messages at once (Concurrency), on the
// worker's Claimer, and paces each channel: one message in flight at a
// time, the next no sooner than Pace after it ended (in this process), or
// as long as a 429's Retry-After asks.
type SlackDeliverer struct {
	cfg     SlackConfig
	claimer *Claimer[*arbiter.SlackDelivery]

	mu sync.Mutex
	// turns is, per account and channel, its pacing; forgetAt is the size
	// at which forget next drops the turns that hold nothing back.
	turns    map[string]channelTurn
	forgetAt int
}

// minForgetAt is the fewest turns kept before forget looks at them.
const minForgetAt = 64

// channelTurn is one channel's pacing.
type channelTurn struct {
	// busy is true while a message to the channel is being sent.
	busy bool
	// next is the earliest time the next message may go.
	next time.Time
}

// NewSlackDeliverer returns a deliverer with cfg's defaults applied; Run
// starts it.
func NewSlackDeliverer(cfg SlackConfig) *SlackDeliverer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		cfg.ID = arbiter.NewID("sld_", 8)
	}
	if cfg.Pace <= 0 {
		cfg.Pace = DefaultSlackPace
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultSlackConcurrency
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultWebhookLease
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &SlackDeliverer{cfg: cfg, turns: map[string]channelTurn{}, forgetAt: minForgetAt}
	d.claimer = NewClaimer(ClaimerConfig[*arbiter.SlackDelivery]{
		Claim: d.claim, Work: func(ctx context.Context, dl *arbiter.SlackDelivery) { d.DeliverSlack(ctx, dl) },
		Slots: cfg.Concurrency, Cooldown: DefaultClaimCooldown, Poll: cfg.Poll, Wake: cfg.Store.SlackMessagesQueued(),
	})
	return d
}

// Run delivers until ctx ends; then it stops claiming and lets the
// messages in flight finish (each call is bounded by the Slack client's
// timeout).
func (d *SlackDeliverer) Run(ctx context.Context) { d.claimer.Run(ctx) }

// claim claims up to n due messages.
func (d *SlackDeliverer) claim(ctx context.Context, n int) []*arbiter.SlackDelivery {
	claimed, err := d.cfg.Store.ClaimSlackMessages(ctx, d.cfg.ID, n, d.cfg.Lease)
	if err != nil && ctx.Err() == nil {
		d.cfg.Logger.Warn("claim Slack messages", "error", err.Error())
	}
	return claimed
}

// DeliverSlack makes one attempt at a claimed message and records it.
func (d *SlackDeliverer) DeliverSlack(ctx context.Context, dl *arbiter.SlackDelivery) arbiter.SlackResult {
	r := d.attempt(ctx, dl)
	// The record outlives a stop: the attempt happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.cfg.Store.RecordSlackAttempt(rctx, d.cfg.ID, dl.Message.ID, r); err != nil {
		d.cfg.Logger.Warn("record Slack attempt", "message", dl.Message.ID, "error", err.Error())
	} else if wait := max(r.Defer, r.RetryAfter); wait > 0 && wait <= retryWakeWithin {
		// A message waiting for its channel's turn goes when it comes,
		// not up to a poll later.
		time.AfterFunc(wait, d.claimer.Notify)
	}
	if r.Error != "" {
		d.cfg.Logger.Info("Slack message not sent", "message", dl.Message.ID, "task_id", dl.Message.TaskID,
			"kind", dl.Message.Kind, "error", r.Error, "retry_after", r.RetryAfter.String())
	}
	return r
}

// attempt sends the message unless its channel's pace or its posts make
// it wait.
func (d *SlackDeliverer) attempt(ctx context.Context, dl *arbiter.SlackDelivery) arbiter.SlackResult {
	m, t, c := dl.Message, dl.Task, dl.Connection
	switch {
	case c == nil || t == nil:
		return arbiter.SlackResult{Skipped: true}
	case m.Kind == arbiter.SlackPost && slack.Ended(t):
		return arbiter.SlackResult{Skipped: true}
	case m.Kind == arbiter.SlackUpdate && dl.PostsPending:
		return arbiter.SlackResult{Defer: d.cfg.Pace}
	case m.Kind == arbiter.SlackUpdate && len(dl.Posts) == 0:
		return arbiter.SlackResult{Skipped: true}
	}
	key := m.AccountID + " " + m.Channel
	// The channel's turn is taken before the call, so that no other
	// message to it goes while this one is in flight; the next turn
	// counts from the end of this call.
	if wait := d.reserve(key); wait > 0 {
		return arbiter.SlackResult{Defer: wait}
	}
	hold := d.cfg.Pace
	defer func() { d.done(key, hold) }()
	desk := d.cfg.DeskURL(t.ID)
	var err error
	var r arbiter.SlackResult
	if m.Kind == arbiter.SlackPost {
		r.ChannelID, r.TS, err = d.cfg.Slack.Post(ctx, c.BotToken, m.Channel, slack.Question(t, desk))
	} else {
		msg := slack.Outcome(t, desk)
		if !slack.Ended(t) {
			msg = slack.Question(t, desk)
		}
		for _, p := range dl.Posts {
			if err = d.cfg.Slack.Update(ctx, c.BotToken, p.ChannelID, p.TS, msg); err != nil {
				break
			}
		}
	}
	if after, ok := slack.RetryAfter(err); ok {
		hold = max(hold, after)
		return arbiter.SlackResult{RetryAfter: after, Error: err.Error()}
	}
	if err != nil {
		return arbiter.SlackResult{Error: err.Error(), Permanent: slack.Permanent(err)}
	}
	r.Sent = true
	return r
}

// reserve takes the channel key's turn and returns 0, or returns how long
// to wait for it: until its next turn, or a pace while a message to it is
// in flight. A turn taken is given back by done.
func (d *SlackDeliverer) reserve(key string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	turn := d.turns[key]
	if turn.busy {
		return d.cfg.Pace
	} else if now := d.cfg.Now(); now.Before(turn.next) {
		return turn.next.Sub(now)
	}
	d.turns[key] = channelTurn{busy: true, next: turn.next}
	return 0
}

// done gives back the channel key's turn and keeps it quiet for after
// from now (its pace, or as long as Slack asked).
func (d *SlackDeliverer) done(key string, after time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	d.turns[key] = channelTurn{next: now.Add(after)}
	d.forget(now)
}

// forget drops, with d.mu held, the turns that no longer hold their
// channel back (none in flight, their next turn come): an absent turn says
// the same. It looks once the map has doubled since it last did, so a
// deliverer that posts to ever new channels keeps about as many turns as
// its channels in one pace, at a cost spread over the turns taken.
func (d *SlackDeliverer) forget(now time.Time) {
	if len(d.turns) < d.forgetAt {
		return
	}
	for key, turn := range d.turns {
		if !turn.busy && !now.Before(turn.next) {
			delete(d.turns, key)
		}
	}
	d.forgetAt = max(2*len(d.turns), minForgetAt)
}
