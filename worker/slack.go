package worker

import (
	"context"
	"errors"
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
	// (required).
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
	// Batch is how many messages one claim takes (default 20).
	Batch int
	// Poll is the wait between claims when nothing is due (default 1s).
	Poll time.Duration
	// Lease is how long a claim holds (default DefaultWebhookLease).
	Lease time.Duration
	// Now is the clock of the pacing (default time.Now).
	Now func() time.Time
}

// DefaultSlackPace is the least time between two messages to a channel.
const DefaultSlackPace = time.Second

// SlackDeliverer sends the Slack outbox: it claims due messages, posts a
// question or updates every posted copy of a task, and records each
// attempt. It paces each channel (one message per Pace, in this process)
// and waits as long as a 429's Retry-After asks, for the message and its
// channel alike.
//
// ClaimSlack and DeliverSlack are the claim-n and work-one halves; Run is
// a small loop over them.
type SlackDeliverer struct {
	cfg SlackConfig

	mu sync.Mutex
	// next is, per account and channel, the earliest time the next
	// message may go.
	next map[string]time.Time
}

// NewSlackDeliverer returns a deliverer with cfg's defaults applied.
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
	if cfg.Batch <= 0 {
		cfg.Batch = 20
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
	return &SlackDeliverer{cfg: cfg, next: map[string]time.Time{}}
}

// Run delivers until ctx ends: it claims a batch, delivers it, and claims
// again at once when the batch was full, after wake (a message queued in
// this process) or after Poll otherwise.
func (d *SlackDeliverer) Run(ctx context.Context, wake <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		batch, err := d.ClaimSlack(ctx, d.cfg.Batch)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("claim Slack messages", "error", err.Error())
		}
		for _, dl := range batch {
			d.DeliverSlack(ctx, dl)
		}
		if len(batch) == d.cfg.Batch && err == nil {
			continue
		}
		timer.Reset(d.cfg.Poll)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
	}
}

// ClaimSlack claims up to n due messages.
func (d *SlackDeliverer) ClaimSlack(ctx context.Context, n int) ([]*arbiter.SlackDelivery, error) {
	return d.cfg.Store.ClaimSlackMessages(ctx, d.cfg.ID, n, d.cfg.Lease)
}

// DeliverSlack makes one attempt at a claimed message and records it.
func (d *SlackDeliverer) DeliverSlack(ctx context.Context, dl *arbiter.SlackDelivery) arbiter.SlackResult {
	r := d.attempt(ctx, dl)
	// The record outlives a stop: the attempt happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.cfg.Store.RecordSlackAttempt(rctx, d.cfg.ID, dl.Message.ID, r); err != nil {
		d.cfg.Logger.Warn("record Slack attempt", "message", dl.Message.ID, "error", err.Error())
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
	if wait := d.wait(key); wait > 0 {
		return arbiter.SlackResult{Defer: wait}
	}
	// The channel's next turn counts from the end of this call.
	defer d.hold(key, d.cfg.Pace)
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
		d.hold(key, after)
		return arbiter.SlackResult{RetryAfter: after, Error: err.Error()}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return arbiter.SlackResult{Defer: time.Millisecond, Error: "stopped"}
		}
		return arbiter.SlackResult{Error: err.Error(), Permanent: slack.Permanent(err)}
	}
	r.Sent = true
	return r
}

// wait returns how long the channel key must wait for its next message.
func (d *SlackDeliverer) wait(key string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now, next := d.cfg.Now(), d.next[key]; now.Before(next) {
		return next.Sub(now)
	}
	return 0
}

// hold keeps the channel key quiet for after from now (its pace, or as
// long as Slack asked), unless it is held longer already.
func (d *SlackDeliverer) hold(key string, after time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if until := d.cfg.Now().Add(after); until.After(d.next[key]) {
		d.next[key] = until
	}
}
