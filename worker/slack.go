package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/slack"
)

// SlackSender is the part of Slack's Web API the Slack deliverer calls
// (slack.Client implements it).
type SlackSender interface {
	Post(ctx context.Context, botToken, channel, messageID, taskID string, msg slack.Message) (channelID, ts string, err error)
	Update(ctx context.Context, botToken, channelID, ts string, msg slack.Message) error
	FindPost(ctx context.Context, botToken, channelID string, since time.Time, messageID string) (string, error)
	ChannelIDOf(ctx context.Context, botToken, channel string) (string, error)
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
	// Pace is the least time between two messages to one channel, in
	// every process (default DefaultSlackPace: Slack allows about one a
	// second).
	Pace time.Duration
	// Concurrency bounds the messages in flight, to all channels
	// (default DefaultSlackConcurrency); one channel has at most one.
	Concurrency int
	// Poll is the wait between claims when nothing is due (default 1s).
	Poll time.Duration
	// CallTimeout bounds the Web API calls of one attempt, together
	// (default slack.ClientTimeout, which bounds each call of the
	// client).
	CallTimeout time.Duration
	// Lease is how long a claim holds, and a channel's turn (default
	// twice CallTimeout: DefaultSlackLease). It must outlast the calls
	// of an attempt and the store's calls around them: a message whose
	// lease ran out during its call is claimed and sent again by
	// another process.
	Lease time.Duration
}

// Defaults of SlackConfig.
const (
	// DefaultSlackPace is the least time between two messages to a
	// channel.
	DefaultSlackPace = time.Second
	// DefaultSlackConcurrency bounds the messages in flight.
	DefaultSlackConcurrency = 8
	// DefaultSlackLease is how long a claim of a Slack message holds, and
	// its channel's turn: twice the bound of an attempt's calls
	// (slack.ClientTimeout), the calls and as long again for the store's
	// calls around them (the turn taken, the record). A replica killed
	// mid-attempt holds the message and its channel this long.
	DefaultSlackLease = leaseCalls * slack.ClientTimeout
)

// SlackDeliverer sends the Slack outbox: it claims due messages, posts a
// question or updates the posted copies of a task in one channel, and
// records each attempt. It works several messages at once (Concurrency),
// on the worker's Claimer, and paces each channel through the store, so
// every process keeps one pace: one message in flight to a channel at a
// time, the next no sooner than Pace after it ended, or as long as a
// 429's Retry-After asks. A post is recorded as begun before its call;
// when its outcome was never recorded (the process died, the call timed
// out), the next attempt looks for it in the channel before posting.
type SlackDeliverer struct {
	cfg     SlackConfig
	claimer *Claimer[*arbiter.SlackDelivery]
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
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = slack.ClientTimeout
	}
	if cfg.Lease <= 0 {
		cfg.Lease = leaseCalls * cfg.CallTimeout
	}
	d := &SlackDeliverer{cfg: cfg}
	d.claimer = NewClaimer(ClaimerConfig[*arbiter.SlackDelivery]{
		Claim: d.claim, Work: func(ctx context.Context, dl *arbiter.SlackDelivery, _ func()) { d.DeliverSlack(ctx, dl) },
		Slots: cfg.Concurrency, Cooldown: DefaultClaimCooldown, Poll: cfg.Poll, Wake: cfg.Store.SlackMessagesQueued(),
	})
	return d
}

// Run delivers until ctx ends; then it stops claiming and lets the
// messages in flight finish (each attempt's calls are bounded by
// CallTimeout).
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
	m := dl.Message
	leaseEnds := time.Now().Add(d.cfg.Lease) // the claim was just made
	ctx, span := startDeliverySpan(ctx, "slack", m.TraceParent, m.ID, m.Kind, m.TaskID, m.Attempts+1)
	r := d.attempt(ctx, dl)
	defer func() { endDeliverySpan(span, slackOutcome(r)) }()
	// The record outlives a stop, and is sent again while the store is
	// unavailable: Slack has the message, which would be sent again once
	// its lease ran out, and the channel's turn is held until then.
	again, err := recordAgain(ctx, d.claimer.Stopping(), leaseEnds, func(ctx context.Context) error {
		return d.cfg.Store.RecordSlackAttempt(ctx, d.cfg.ID, m.ID, r)
	})
	if recordedBeforeTheStoreWasLost(again, err) {
		d.cfg.Logger.Info("Slack attempt recorded before the store was lost, or its lease ran out", "message", m.ID,
			"reason", arbiter.ErrorMessage(err))
	} else if err != nil {
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

// attempt sends the message unless its channel's turn or its posts make
// it wait.
func (d *SlackDeliverer) attempt(ctx context.Context, dl *arbiter.SlackDelivery) arbiter.SlackResult {
	m, t, c := dl.Message, dl.Task, dl.Connection
	unrecorded := m.Kind == arbiter.SlackPost && m.PostStartedAt != 0
	switch {
	case c == nil || t == nil:
		return arbiter.SlackResult{Skipped: true}
	case m.Kind == arbiter.SlackPost && slack.Ended(t) && !unrecorded:
		return arbiter.SlackResult{Skipped: true}
	case m.Kind == arbiter.SlackUpdate && dl.PostsPending:
		return arbiter.SlackResult{Defer: d.cfg.Pace}
	case m.Kind == arbiter.SlackUpdate && len(dl.Posts) == 0:
		return arbiter.SlackResult{Skipped: true}
	}
	// The channel's turn is taken before the call, in the store, so that
	// no other message to it goes while this one is in flight, from any
	// process; the next turn counts from the record of this one.
	if pause, held, err := d.cfg.Store.BeginSlackAttempt(ctx, d.cfg.ID, m.ID, d.cfg.Lease); err != nil {
		return arbiter.SlackResult{Defer: d.cfg.Pace, Error: "take the channel's turn: " + err.Error()}
	} else if held {
		return arbiter.SlackResult{Defer: d.cfg.Pace}
	} else if pause > 0 {
		return arbiter.SlackResult{Defer: pause}
	}
	// The calls end within CallTimeout, well within the lease.
	calls, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	r := d.send(calls, dl, unrecorded)
	r.Quiet = max(d.cfg.Pace, r.RetryAfter)
	return r
}

// send makes the message's calls, with its channel's turn held.
func (d *SlackDeliverer) send(ctx context.Context, dl *arbiter.SlackDelivery, unrecorded bool) arbiter.SlackResult {
	m, t, c := dl.Message, dl.Task, dl.Connection
	desk := d.cfg.DeskURL(t.ID)
	if m.Kind == arbiter.SlackUpdate {
		msg := slack.Outcome(t, desk)
		if !slack.Ended(t) {
			msg = slack.Question(t, desk)
		}
		for _, p := range dl.Posts {
			if err := d.cfg.Slack.Update(ctx, c.BotToken, p.ChannelID, p.TS, msg); err != nil {
				return failed(err, false)
			}
		}
		return arbiter.SlackResult{Sent: true}
	}
	if unrecorded {
		channelID, ts, err := d.findPost(ctx, dl)
		switch {
		case err != nil:
			return failed(err, false)
		case ts != "":
			return arbiter.SlackResult{Sent: true, Recovered: true, ChannelID: channelID, TS: ts}
		case slack.Ended(t):
			// Not in Slack, and no longer a question to ask.
			return arbiter.SlackResult{Skipped: true}
		}
	}
	channelID, ts, err := d.cfg.Slack.Post(ctx, c.BotToken, m.Channel, m.ID, t.ID, slack.Question(t, desk))
	if err != nil {
		// Slack's refusal says the post is not there; a timeout does not.
		return failed(err, slack.Refused(err))
	}
	return arbiter.SlackResult{Sent: true, ChannelID: channelID, TS: ts}
}

// findPost looks in the message's channel for the post an attempt whose
// outcome was never recorded may have made, and returns its channel's id
// and ts, or "" when it is not there. An app without the scopes to read
// the channel (an install older than this search) cannot look: it posts
// again, as it did before, and the log says which scopes to add.
func (d *SlackDeliverer) findPost(ctx context.Context, dl *arbiter.SlackDelivery) (channelID, ts string, err error) {
	m, c := dl.Message, dl.Connection
	channelID = dl.ChannelID
	if channelID == "" {
		if channelID, err = d.cfg.Slack.ChannelIDOf(ctx, c.BotToken, m.Channel); err != nil && !slack.MissingScope(err) {
			return "", "", err
		}
	}
	if channelID != "" && err == nil {
		ts, err = d.cfg.Slack.FindPost(ctx, c.BotToken, channelID, m.PostStartedAt.Time(), m.ID)
		if err == nil || !slack.MissingScope(err) {
			return channelID, ts, err
		}
	}
	d.cfg.Logger.Warn("Slack: cannot look for a post whose answer was lost, so it may be posted twice; "+
		"add the channels:history, groups:history, channels:read and groups:read scopes to the Slack app",
		"account_id", m.AccountID, "task_id", m.TaskID, "channel", m.Channel, "found_channel", channelID != "")
	return "", "", nil
}

// failed is the result of a call that ended in err; unposted says no
// copy of the post can be in Slack after it.
func failed(err error, unposted bool) arbiter.SlackResult {
	if after, ok := slack.RetryAfter(err); ok {
		return arbiter.SlackResult{RetryAfter: after, Error: err.Error(), Unposted: unposted}
	}
	return arbiter.SlackResult{Error: err.Error(), Permanent: slack.Permanent(err), Unposted: unposted}
}
