package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// WebhookConfig configures a Deliverer. Zero values take the defaults.
type WebhookConfig struct {
	// Store is where messages are claimed from and attempts recorded
	// (required).
	Store arbiter.WebhookDeliveryService
	// Queued, when set, receives when this process queued messages, so
	// they go out at once rather than at the next poll (the db package's
	// WebhooksQueued).
	Queued <-chan struct{}
	// AllowPrivate lets deliveries reach loopback, private and other
	// non-public addresses (ARBITER_WEBHOOK_ALLOW_PRIVATE), for
	// development and tests.
	AllowPrivate bool
	// Client sends the deliveries (default NewWebhookClient(AllowPrivate)).
	Client *http.Client
	// Logger receives claim and record failures (default slog.Default()).
	Logger *slog.Logger
	// Observer, when set, is told of each attempt.
	Observer WebhookObserver
	// Now stamps attempts and webhook-timestamp and schedules retries
	// (default time.Now); give the store the same clock.
	Now arbiter.Clock
	// Jitter returns the fraction, from -arbiter.WebhookJitter to
	// arbiter.WebhookJitter, by which a retry delay varies (default
	// uniformly random).
	Jitter func() float64
	// ID names this deliverer in leases (default whd_ + random).
	ID string
	// Concurrency bounds the deliveries in flight (default
	// DefaultWebhookConcurrency).
	Concurrency int
	// Poll is the wait between claims when nothing is due (default 1s).
	Poll time.Duration
	// Lease is how long a claim holds (default DefaultWebhookLease); a
	// message whose deliverer vanished is claimed again after it.
	Lease time.Duration
	// PruneEvery is how often delivered and failed messages older than
	// arbiter.WebhookRetention are deleted (default 1h; the first time at
	// start).
	PruneEvery time.Duration
}

// WebhookObserver receives what a Deliverer does, for metrics
// (metrics.Metrics implements it).
type WebhookObserver interface {
	// WebhookAttempted is called after each attempt with the time it
	// took to answer (or fail), whether it delivered the message, and
	// whether it failed the message for good (its schedule ran out, or
	// its endpoint is gone).
	WebhookAttempted(d time.Duration, delivered, failed bool)
}

// Defaults of WebhookConfig.
const (
	DefaultWebhookConcurrency = 64
	DefaultWebhookLease       = time.Minute
)

// maxDrainBytes is how much of a response body is read past the logged part
// so the connection can be reused; a longer body closes it.
const maxDrainBytes = 64 << 10

// Deliverer sends due webhook messages: it claims them under a lease,
// signs and posts each, and records the attempt, which moves the message
// on by arbiter.NextWebhookStep. Create it with NewDeliverer.
type Deliverer struct {
	cfg     WebhookConfig
	log     *slog.Logger
	claimer *Claimer[*arbiter.WebhookDelivery]
	// recorder records finished attempts, those that wait together in
	// one transaction.
	recorder *recorder[arbiter.WebhookRecord, arbiter.WebhookRecorded]
}

// NewDeliverer returns a deliverer; Run starts it.
func NewDeliverer(cfg WebhookConfig) *Deliverer {
	if cfg.ID == "" {
		cfg.ID = arbiter.NewID("whd_", 8)
	}
	if cfg.Client == nil {
		cfg.Client = NewWebhookClient(cfg.AllowPrivate)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func() float64 { return (rand.Float64()*2 - 1) * arbiter.WebhookJitter }
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultWebhookConcurrency
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Lease < arbiter.WebhookTimeout+recordTimeout {
		cfg.Lease = DefaultWebhookLease
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	d := &Deliverer{
		cfg: cfg,
		log: cfg.Logger.With("deliverer", cfg.ID),
		recorder: newRecorder(cfg.Concurrency, func(ctx context.Context, records []arbiter.WebhookRecord) ([]arbiter.WebhookRecorded, error) {
			return cfg.Store.RecordWebhookAttempts(ctx, cfg.ID, records)
		}, func(err error) arbiter.WebhookRecorded { return arbiter.WebhookRecorded{Err: err} }),
	}
	d.claimer = NewClaimer(ClaimerConfig[*arbiter.WebhookDelivery]{
		Claim: d.claim, Work: func(ctx context.Context, dl *arbiter.WebhookDelivery, _ func()) { d.deliver(ctx, dl) }, Release: d.release,
		Slots: cfg.Concurrency, Cooldown: DefaultClaimCooldown, Poll: cfg.Poll, Wake: cfg.Queued,
	})
	return d
}

// Notify wakes the claim loop at once. It never blocks.
func (d *Deliverer) Notify() { d.claimer.Notify() }

// Run delivers until ctx ends. Then it stops claiming, lets the deliveries
// in flight finish (each is bounded by arbiter.WebhookTimeout) and releases
// the leases of what it claimed but did not send. Old messages are pruned
// meanwhile, until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	go d.recorder.run(context.WithoutCancel(ctx))
	pruning := webhookPruning(d.cfg.Store, d.cfg.Now, d.cfg.PruneEvery, d.log)
	pruning.Start(ctx)
	defer pruning.Stop()
	d.claimer.Run(ctx)
}

// claim claims up to n messages due.
func (d *Deliverer) claim(ctx context.Context, n int) []*arbiter.WebhookDelivery {
	claimed, err := d.cfg.Store.ClaimWebhookMessages(ctx, d.cfg.ID, n, d.cfg.Lease)
	if err != nil && ctx.Err() == nil {
		d.log.Error("claim webhook messages", "error", err.Error())
	}
	return claimed
}

// release, once the deliveries in flight have finished, records the last
// of their attempts and releases the leases of the messages not sent.
func (d *Deliverer) release(ctx context.Context) {
	d.recorder.close()
	if err := d.cfg.Store.ReleaseWebhookMessages(ctx, d.cfg.ID); err != nil {
		d.log.Error("release webhook leases", "error", err.Error())
	}
}

// deliver makes one attempt at a claimed message and records it.
func (d *Deliverer) deliver(ctx context.Context, del *arbiter.WebhookDelivery) {
	m := del.Message
	leaseEnds := time.Now().Add(d.cfg.Lease) // the claim was just made
	now := d.cfg.Now()
	a, retryAfter := d.send(ctx, del, now)
	step := arbiter.NextWebhookStep(a, m.Attempts+1, m.EndpointID != "", retryAfter, now, d.cfg.Jitter())
	if d.cfg.Observer != nil {
		d.cfg.Observer.WebhookAttempted(a.Latency, step.Status == arbiter.WebhookDelivered, step.Status == arbiter.WebhookFailed)
	}
	// The receiver has the message: the record is sent again while the
	// store is unavailable, else the message would be sent again once
	// its lease ran out.
	var out arbiter.WebhookRecorded
	again, err := recordAgain(ctx, d.claimer.Stopping(), leaseEnds, func(context.Context) error {
		out = d.recorder.record(arbiter.WebhookRecord{MessageID: m.ID, Step: step})
		return out.Err
	})
	disabled := out.Disabled
	if err != nil {
		switch {
		case recordedBeforeTheStoreWasLost(again, err):
			d.log.Info("webhook attempt recorded before the store was lost, or its lease ran out", "message", m.ID,
				"reason", arbiter.ErrorMessage(err))
			return
		case arbiter.ErrorCode(err) == arbiter.ECONFLICT:
			d.log.Warn("webhook attempt not recorded", "message", m.ID, "reason", arbiter.ErrorMessage(err))
			return
		}
		d.log.Error("record webhook attempt", "message", m.ID, "error", err.Error())
		return
	}
	if step.Status == arbiter.WebhookPending {
		d.wakeAt(step.NextAttemptAt)
	}
	if step.Status == arbiter.WebhookFailed {
		d.log.Info("webhook message failed", "message", m.ID, "endpoint", m.EndpointID, "attempts", m.Attempts+1)
	}
	if disabled != nil {
		// The store wrote the mail that tells its owner to the mail outbox.
		d.log.Warn("webhook endpoint disabled", "endpoint", disabled.Endpoint.ID, "reason", disabled.Endpoint.Disabled)
	}
}

// retryWakeWithin bounds the retries wakeAt keeps a timer for: a later one
// may come a poll late, which is well within its jitter.
const retryWakeWithin = time.Minute

// wakeAt wakes the claim loop when a retry this deliverer scheduled falls
// due at t, so that a 5 s retry lands within its jitter (±0.5 s) rather
// than up to a poll (1 s) late.
func (d *Deliverer) wakeAt(t arbiter.Timestamp) {
	if wait := t.Time().Sub(d.cfg.Now()); wait <= retryWakeWithin {
		time.AfterFunc(max(wait, 0), d.Notify)
	}
}

// send posts the message, signed at now, and returns the attempt and the
// answer's Retry-After.
func (d *Deliverer) send(ctx context.Context, del *arbiter.WebhookDelivery, now time.Time) (arbiter.WebhookAttempt, time.Duration) {
	m := del.Message
	a := arbiter.WebhookAttempt{MessageID: m.ID, AttemptedAt: arbiter.TimestampOf(now)}
	// The delivery is a child of the span that queued the message (the
	// create's, an agent decision's, a person's wait), in its trace; none
	// when that was not traced.
	ctx, span := telemetry.StartChild(telemetry.WithParent(ctx, m.TraceParent), "webhook deliver", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("arbiter.webhook.message_id", m.ID), attribute.String("arbiter.webhook.event_type", m.EventType),
			attribute.String("arbiter.task_id", m.TaskID), attribute.Int("arbiter.webhook.attempt", m.Attempts+1))
	}
	defer func() {
		if !span.IsRecording() {
			return
		}
		if a.StatusCode != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", a.StatusCode))
		}
		if a.StatusCode < 200 || a.StatusCode > 299 {
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}()
	ctx, cancel := context.WithTimeout(ctx, arbiter.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Payload))
	if err != nil {
		a.Error = "The URL could not be requested."
		return a, 0
	}
	// The receiver continues the trace (traceparent).
	telemetry.Inject(ctx, req.Header)
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", arbiter.WebhookUserAgent)
	req.Header.Set("webhook-id", m.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", arbiter.SignWebhook(m.ID, ts, m.Payload, del.Secrets...))
	started := time.Now()
	res, err := d.cfg.Client.Do(req)
	if err != nil {
		a.Latency, a.Error = time.Since(started), describeSendError(err)
		if addressRefused(err) {
			a.Latency = 0 // how long a lookup took would tell names apart too
		}
		return a, 0
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, arbiter.WebhookResponseBodyBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxDrainBytes))
	res.Body.Close()
	a.Latency, a.StatusCode = time.Since(started), res.StatusCode
	a.ResponseBody = arbiter.WebhookResponseExcerpt(body)
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		a.Error = "Redirects are not followed; answer 2xx at the URL itself."
	}
	return a, arbiter.ParseRetryAfter(res.Header.Get("Retry-After"), now)
}

// describeSendError says why a request got no answer, in words for the
// account's attempt log that name no address the host resolved to, and
// that read the same for every address a delivery may not reach.
func describeSendError(err error) string {
	var netErr net.Error
	switch {
	case addressRefused(err):
		return noPublicAddress
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return "No answer within " + arbiter.WebhookTimeout.String() + "."
	case strings.Contains(err.Error(), "connection refused"):
		return "The connection was refused."
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"):
		return "The TLS handshake failed: the server's certificate is not valid for the host, or TLS is not offered."
	case strings.Contains(err.Error(), "connection reset") || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "The connection was closed before an answer came."
	}
	return "The request failed before an answer came."
}
