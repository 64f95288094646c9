package worker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/teams"
)

// TeamsSender is the part of the Bot Connector the Teams deliverer calls
// (teams.Connector implements it, with the bot's access token).
type TeamsSender interface {
	Send(ctx context.Context, conn *arbiter.TeamsConnection, serviceURL, conversationID string, a *teams.Activity) (string, error)
	Update(ctx context.Context, conn *arbiter.TeamsConnection, serviceURL, conversationID, activityID string, a *teams.Activity) error
}

// TeamsConfig configures a TeamsDeliverer. Zero values take the defaults.
type TeamsConfig struct {
	// Store is where messages are claimed from and attempts recorded
	// (required); its TeamsMessagesQueued wakes the deliverer.
	Store arbiter.TeamsDeliveryService
	// Teams sends the cards (required).
	Teams TeamsSender
	// DeskURL returns the desk's page of a task, which every card links
	// to (required).
	DeskURL func(taskID string) string
	// Logger receives claim and record failures (default slog.Default()).
	Logger *slog.Logger
	// ID names this deliverer in leases (default tmd_ + random).
	ID string
	// Pace is the least time between two messages to one conversation,
	// in every process (default DefaultTeamsPace).
	Pace time.Duration
	// Concurrency bounds the messages in flight, to all conversations
	// (default DefaultTeamsConcurrency); one conversation has at most one.
	Concurrency int
	// Poll is the wait between claims when nothing is due (default 1s).
	Poll time.Duration
	// CallTimeout bounds the Bot Connector's calls of one attempt,
	// together (default teams.ClientTimeout, which bounds each call of
	// the connector and each fetch of the bot's token).
	CallTimeout time.Duration
	// Lease is how long a claim holds, and a conversation's turn
	// (default twice CallTimeout: DefaultTeamsLease). It must outlast
	// the calls of an attempt and the store's calls around them: a
	// message whose lease ran out during its call is claimed and sent
	// again by another process.
	Lease time.Duration
	// Jitter returns the fraction, from -TeamsRetry.Jitter to
	// TeamsRetry.Jitter, by which a retry delay varies (default uniformly
	// random).
	Jitter func() float64
}

// Defaults of TeamsConfig.
const (
	// DefaultTeamsPace is the least time between two messages to a
	// conversation: the Bot Connector takes a bot's messages to one
	// conversation in bursts of a few a second, and about one every two
	// seconds over an hour; its 429s say when to slow down further.
	DefaultTeamsPace = time.Second
	// DefaultTeamsConcurrency bounds the messages in flight.
	DefaultTeamsConcurrency = 8
	// DefaultTeamsLease is how long a claim of a Teams message holds, and
	// its conversation's turn: twice the bound of an attempt's calls
	// (teams.ClientTimeout), the calls (a token fetch, which no context
	// cuts, at most as long again) and the store's calls around them.
	DefaultTeamsLease = leaseCalls * teams.ClientTimeout
)

// TeamsDeliverer sends the Teams outbox: it claims due messages, posts a
// question's card to a conversation or updates the task's posted cards in
// one, and records each attempt. It works several messages at once
// (Concurrency), on the worker's Claimer, and paces each conversation
// through the store, so every process keeps one pace: one message in
// flight to a conversation at a time, the next no sooner than Pace after
// it ended, or as long as a 429's Retry-After asks.
type TeamsDeliverer struct {
	cfg     TeamsConfig
	log     *slog.Logger
	claimer *Claimer[*arbiter.TeamsDelivery]
}

// NewTeamsDeliverer returns a deliverer with cfg's defaults applied; Run
// starts it.
func NewTeamsDeliverer(cfg TeamsConfig) *TeamsDeliverer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		cfg.ID = arbiter.NewID("tmd_", 8)
	}
	if cfg.Pace <= 0 {
		cfg.Pace = DefaultTeamsPace
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultTeamsConcurrency
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = teams.ClientTimeout
	}
	if cfg.Lease <= 0 {
		cfg.Lease = leaseCalls * cfg.CallTimeout
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func() float64 { return (rand.Float64()*2 - 1) * arbiter.TeamsRetry.Jitter }
	}
	d := &TeamsDeliverer{cfg: cfg, log: cfg.Logger.With("deliverer", cfg.ID)}
	d.claimer = NewClaimer(ClaimerConfig[*arbiter.TeamsDelivery]{
		Claim: d.claim, Work: func(ctx context.Context, dl *arbiter.TeamsDelivery, _ func()) { d.Deliver(ctx, dl) },
		Release: func(ctx context.Context) {
			if err := cfg.Store.ReleaseTeamsMessages(ctx, cfg.ID); err != nil {
				d.log.Error("release Teams message leases", "error", err.Error())
			}
		},
		Slots: cfg.Concurrency, Cooldown: DefaultClaimCooldown, Poll: cfg.Poll, Wake: cfg.Store.TeamsMessagesQueued(),
	})
	return d
}

// Run delivers until ctx ends; then it stops claiming, lets the messages
// in flight finish (each attempt's calls are bounded by CallTimeout) and
// releases the leases of what it claimed and did not send.
func (d *TeamsDeliverer) Run(ctx context.Context) { d.claimer.Run(ctx) }

// claim claims up to n due messages.
func (d *TeamsDeliverer) claim(ctx context.Context, n int) []*arbiter.TeamsDelivery {
	claimed, err := d.cfg.Store.ClaimTeamsMessages(ctx, d.cfg.ID, n, d.cfg.Lease)
	if err != nil && ctx.Err() == nil {
		d.log.Warn("claim Teams messages", "error", err.Error())
	}
	return claimed
}

// Deliver makes one attempt at a claimed message, records it, and returns
// where it left the message.
func (d *TeamsDeliverer) Deliver(ctx context.Context, dl *arbiter.TeamsDelivery) arbiter.DeliveryStep {
	m := dl.Message
	leaseEnds := time.Now().Add(d.cfg.Lease) // the claim was just made
	ctx, span := startDeliverySpan(ctx, "teams", m.TraceParent, m.ID, m.Kind, m.TaskID, m.Attempts+1)
	r := d.attempt(ctx, dl)
	step := arbiter.NextDelivery(arbiter.TeamsRetry, m.Attempts, r.DeliveryOutcome, d.cfg.Jitter())
	defer endDeliverySpan(span, deliveryOutcome(step, r.DeliveryOutcome))
	// The record outlives a stop, and is sent again while the store is
	// unavailable: Teams has the card, which would be sent again once its
	// lease ran out, and the conversation's turn is held until then.
	again, err := recordAgain(ctx, d.claimer.Stopping(), leaseEnds, func(ctx context.Context) error {
		return d.cfg.Store.RecordTeamsAttempt(ctx, d.cfg.ID, m.ID, step, r)
	})
	if recordedBeforeTheStoreWasLost(again, err) {
		d.log.Info("Teams attempt recorded before the store was lost, or its lease ran out", "message", m.ID,
			"reason", arbiter.ErrorMessage(err))
		return step
	} else if err != nil {
		d.log.Warn("record Teams attempt", "message", m.ID, "error", err.Error())
		return step
	}
	if step.State == arbiter.DeliveryRetry && step.Delay <= retryWakeWithin {
		// A message waiting for its conversation's turn goes when it
		// comes, not up to a poll later.
		time.AfterFunc(step.Delay, d.claimer.Notify)
	}
	if r.Error != "" {
		d.log.Info("Teams message not sent", "message", m.ID, "task_id", m.TaskID, "kind", m.Kind, "state", step.State,
			"attempts", step.Attempts, "error", r.Error, "retry_after", r.RetryAfter.String())
	}
	return step
}

// attempt sends the message unless there is nothing to send, or its
// conversation's turn or its posts make it wait.
func (d *TeamsDeliverer) attempt(ctx context.Context, dl *arbiter.TeamsDelivery) arbiter.TeamsResult {
	m, t := dl.Message, dl.Task
	skip := arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Skipped: true}}
	switch {
	case dl.Connection == nil || t == nil:
		return skip
	case m.Kind == arbiter.TeamsPost && !t.InReviewQueue():
		return skip // ended before its card went out
	case m.Kind == arbiter.TeamsPost && dl.Conversation == nil:
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Permanent: true},
			Error: "the bot is in no Teams conversation named " + m.Conversation}
	case m.Kind == arbiter.TeamsUpdate && dl.PostsPending:
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Defer: d.cfg.Pace}}
	case m.Kind == arbiter.TeamsUpdate && len(dl.Posts) == 0:
		return skip
	}
	// The conversation's turn is taken before the call, in the store, so
	// that no other message to it goes while this one is in flight, from
	// any process; the next turn counts from the record of this one.
	if pause, held, err := d.cfg.Store.BeginTeamsAttempt(ctx, d.cfg.ID, m.ID, d.cfg.Lease); err != nil {
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Defer: d.cfg.Pace}, Error: "take the conversation's turn: " + err.Error()}
	} else if held {
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Defer: d.cfg.Pace}}
	} else if pause > 0 {
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Defer: pause}}
	}
	// The calls end within CallTimeout, well within the lease.
	calls, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	r := d.send(calls, dl)
	r.Quiet = max(d.cfg.Pace, r.RetryAfter)
	return r
}

// send makes the message's calls, with its conversation's turn held: a
// post's card, or every posted card of the conversation rewritten.
func (d *TeamsDeliverer) send(ctx context.Context, dl *arbiter.TeamsDelivery) arbiter.TeamsResult {
	m, t, conn := dl.Message, dl.Task, dl.Connection
	msg := teams.Message(t, teams.Current(t, d.cfg.DeskURL(t.ID), dl.Deciders))
	if m.Kind == arbiter.TeamsUpdate {
		for _, p := range dl.Posts {
			serviceURL := p.ServiceURL
			if c := dl.Conversation; c != nil && c.ID == p.ConversationID {
				serviceURL = c.ServiceURL // Teams may move a conversation to another service URL
			}
			err := d.cfg.Teams.Update(ctx, conn, serviceURL, p.ConversationID, p.ActivityID, msg)
			if teams.Gone(err) {
				// Deleted in Teams: nothing left to keep true there.
				d.log.Info("a Teams card to update is gone", "message", m.ID, "task_id", t.ID, "error", err.Error())
				continue
			} else if err != nil {
				return teamsFailed(err)
			}
		}
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Sent: true}}
	}
	c := dl.Conversation
	id, err := d.cfg.Teams.Send(ctx, conn, c.ServiceURL, c.ID, msg)
	if err != nil {
		return teamsFailed(err)
	}
	return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Sent: true}, ActivityID: id, ConversationID: c.ID,
		ServiceURL: c.ServiceURL}
}

// teamsFailed is the result of a call that ended in err.
func teamsFailed(err error) arbiter.TeamsResult {
	if after, ok := teams.RetryAfter(err); ok {
		return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{RetryAfter: after}, Error: err.Error()}
	}
	return arbiter.TeamsResult{DeliveryOutcome: arbiter.DeliveryOutcome{Permanent: teams.Permanent(err)}, Error: err.Error()}
}
