package worker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/arbiterhq/arbiter"
)

// MailConfig configures a MailDeliverer. Zero values take the defaults.
type MailConfig struct {
	// Store is where mails are claimed from and attempts recorded
	// (required); its MailQueued wakes the deliverer.
	Store arbiter.MailDeliveryService
	// Mail sends each mail (required): the mail package's SMTP or log
	// mailer.
	Mail arbiter.MailSender
	// Permanent, when set, says whether a send's error is one no retry
	// mends (mail.Permanent); otherwise every failure is tried again.
	Permanent func(error) bool
	// Links are the addresses mails link to.
	Links arbiter.MailLinks
	// Logger receives claim, send and record failures (default
	// slog.Default()).
	Logger *slog.Logger
	// ID names this deliverer in leases (default mld_ + random).
	ID string
	// Concurrency bounds the mails in flight (default
	// DefaultMailConcurrency).
	Concurrency int
	// Poll is the wait between claims when nothing is due (default 1s).
	Poll time.Duration
	// Lease is how long a claim holds (default DefaultWebhookLease): a
	// mail whose deliverer vanished is claimed again after it.
	Lease time.Duration
	// Jitter returns the fraction, from -MailRetry.Jitter to
	// MailRetry.Jitter, by which a retry delay varies (default uniformly
	// random).
	Jitter func() float64
	// PruneEvery is how often sent and failed mails older than
	// arbiter.MailRetention are deleted (default 1h; the first time at
	// start).
	PruneEvery time.Duration
	// Now is the clock of the pruning (default time.Now).
	Now arbiter.Clock
}

// DefaultMailConcurrency bounds the mails in flight: an SMTP server takes
// a few connections at a time, and the SMTP mailer keeps as many sessions
// open (mail.SMTPSessions).
const DefaultMailConcurrency = 8

// MailDeliverer sends the mail outbox: it claims due mails under a lease
// on the worker's Claimer, renders and sends each, and records the
// attempt, which moves the mail on by arbiter.MailRetry. An SMTP server
// that is down or says to try later delays mail; none is lost.
type MailDeliverer struct {
	cfg     MailConfig
	log     *slog.Logger
	claimer *Claimer[*arbiter.MailMessage]
	// recorder records finished attempts, those that wait together in
	// one transaction.
	recorder *recorder[arbiter.MailRecord, error]
}

// NewMailDeliverer returns a deliverer with cfg's defaults applied; Run
// starts it.
func NewMailDeliverer(cfg MailConfig) *MailDeliverer {
	if cfg.ID == "" {
		cfg.ID = arbiter.NewID("mld_", 8)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Permanent == nil {
		cfg.Permanent = func(error) bool { return false }
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultMailConcurrency
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultWebhookLease
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func() float64 { return (rand.Float64()*2 - 1) * arbiter.MailRetry.Jitter }
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &MailDeliverer{cfg: cfg, log: cfg.Logger.With("deliverer", cfg.ID),
		recorder: newRecorder(cfg.Concurrency, func(ctx context.Context, records []arbiter.MailRecord) ([]error, error) {
			return cfg.Store.RecordMailAttempts(ctx, cfg.ID, records)
		}, func(err error) error { return err })}
	d.claimer = NewClaimer(ClaimerConfig[*arbiter.MailMessage]{
		Claim: d.claim, Work: func(ctx context.Context, m *arbiter.MailMessage, _ func()) { d.deliver(ctx, m) },
		Release: func(ctx context.Context) {
			d.recorder.close()
			if err := cfg.Store.ReleaseMail(ctx, cfg.ID); err != nil {
				d.log.Error("release mail leases", "error", err.Error())
			}
		},
		Slots: cfg.Concurrency, Cooldown: DefaultClaimCooldown, Poll: cfg.Poll, Wake: cfg.Store.MailQueued(),
	})
	return d
}

// Notify wakes the claim loop at once. It never blocks.
func (d *MailDeliverer) Notify() { d.claimer.Notify() }

// Run delivers until ctx ends; then it stops claiming, lets the mails in
// flight finish (each send is bounded by the mailer's timeout) and
// releases the leases of what it claimed and did not send. Old mails are
// pruned meanwhile.
func (d *MailDeliverer) Run(ctx context.Context) {
	go d.recorder.run(context.WithoutCancel(ctx))
	pruning := mailPruning(d.cfg.Store, d.cfg.Now, d.cfg.PruneEvery, d.log)
	pruning.Start(ctx)
	defer pruning.Stop()
	d.claimer.Run(ctx)
}

// claim claims up to n due mails.
func (d *MailDeliverer) claim(ctx context.Context, n int) []*arbiter.MailMessage {
	claimed, err := d.cfg.Store.ClaimMail(ctx, d.cfg.ID, n, d.cfg.Lease)
	if err != nil && ctx.Err() == nil {
		d.log.Error("claim mail", "error", err.Error())
	}
	return claimed
}

// deliver makes one attempt at a claimed mail and has the recorder record
// it.
func (d *MailDeliverer) deliver(ctx context.Context, m *arbiter.MailMessage) {
	leaseEnds := time.Now().Add(d.cfg.Lease) // the claim was just made
	rec := d.attempt(ctx, m)
	// The server took the mail: the record is sent again while the store
	// is unavailable, else the mail would be sent again once its lease
	// ran out.
	again, err := recordAgain(ctx, d.claimer.Stopping(), leaseEnds, func(context.Context) error {
		return d.recorder.record(rec)
	})
	d.recorded(m, rec, again, err)
}

// attempt makes one attempt at a claimed mail and returns where it leaves
// the mail. A mail whose content cannot be read fails at once.
func (d *MailDeliverer) attempt(ctx context.Context, m *arbiter.MailMessage) arbiter.MailRecord {
	ctx, span := startDeliverySpan(ctx, "mail", m.TraceParent, m.ID, m.Kind, m.TaskID, m.Attempts+1)
	var o arbiter.DeliveryOutcome
	var failure string
	subject, body, err := m.Compose(d.cfg.Links)
	if err == nil {
		err = d.cfg.Mail.Send(ctx, m.To, subject, body)
		o.Permanent = err != nil && d.cfg.Permanent(err)
	} else {
		o.Permanent = true
	}
	if err != nil {
		failure = err.Error()
	} else {
		o.Sent = true
	}
	step := arbiter.NextDelivery(arbiter.MailRetry, m.Attempts, o, d.cfg.Jitter())
	endDeliverySpan(span, deliveryOutcome(step, o))
	return arbiter.MailRecord{MailID: m.ID, Step: step, LastError: failure}
}

// recorded logs what recording the attempt rec at m did, and wakes the
// claim loop when a retry falls due soon.
func (d *MailDeliverer) recorded(m *arbiter.MailMessage, rec arbiter.MailRecord, again bool, err error) {
	switch {
	case recordedBeforeTheStoreWasLost(again, err):
		d.log.Info("mail attempt recorded before the store was lost, or its lease ran out", "mail", m.ID,
			"reason", arbiter.ErrorMessage(err))
		return
	case err != nil:
		d.log.Warn("record mail attempt", "mail", m.ID, "error", err.Error())
		return
	}
	switch step := rec.Step; step.State {
	case arbiter.DeliveryRetry:
		d.log.Info("mail not sent; it will be tried again", "mail", m.ID, "kind", m.Kind, "account", m.AccountID,
			"attempts", step.Attempts, "retry_in", step.Delay.String(), "error", rec.LastError)
		if step.Delay <= retryWakeWithin {
			time.AfterFunc(step.Delay, d.Notify)
		}
	case arbiter.DeliveryFailed:
		d.log.Error("mail given up", "mail", m.ID, "kind", m.Kind, "account", m.AccountID, "attempts", step.Attempts,
			"error", rec.LastError)
	}
}

// DeliverDue claims the mails due now and delivers each, one at a time,
// recording each claim's attempts together, until none is due, and
// returns how many it sent: a round without the claim loop, for tests and
// tools.
func (d *MailDeliverer) DeliverDue(ctx context.Context) (int, error) {
	sent := 0
	for {
		leaseEnds := time.Now().Add(d.cfg.Lease)
		claimed, err := d.cfg.Store.ClaimMail(ctx, d.cfg.ID, d.cfg.Concurrency, d.cfg.Lease)
		if err != nil || len(claimed) == 0 {
			return sent, err
		}
		records := make([]arbiter.MailRecord, len(claimed))
		for i, m := range claimed {
			records[i] = d.attempt(ctx, m)
		}
		// The record outlives a stop, and is sent again while the store
		// is unavailable: the attempts happened.
		var errs []error
		again, err := recordAgain(ctx, ctx.Done(), leaseEnds, func(rctx context.Context) (err error) {
			errs, err = d.cfg.Store.RecordMailAttempts(rctx, d.cfg.ID, records)
			return err
		})
		if err != nil {
			return sent, err
		}
		for i, m := range claimed {
			d.recorded(m, records[i], again, errs[i])
			if errs[i] == nil && records[i].Step.State == arbiter.DeliveryDone {
				sent++
			}
		}
	}
}
