package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/arbiterhq/arbiter"
)

// The maintenance services: the worker's jobs that are not the claim loop
// (the heartbeat, the expiry sweep, pruning, digests, reminders), each a small
// service with its interval, as River's internal/maintenance. The worker
// starts them before it claims and stops them after its last release.

// service is a maintenance job: Start runs it in a goroutine of its own
// until Stop, which waits for it to end.
type service interface {
	Start(ctx context.Context)
	Stop()
}

// lifecycle is the Start/Stop plumbing the services share.
type lifecycle struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs run in a goroutine under a context Stop cancels.
func (l *lifecycle) start(ctx context.Context, run func(context.Context)) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
}

// Stop ends the service and waits for it.
func (l *lifecycle) Stop() {
	l.cancel()
	<-l.done
}

// periodic is a service that runs its round at start and then every
// interval, until stopped.
type periodic struct {
	lifecycle
	every time.Duration
	round func(ctx context.Context)
}

// Start starts the rounds.
func (p *periodic) Start(ctx context.Context) {
	p.start(ctx, func(ctx context.Context) {
		tick := time.NewTicker(p.every)
		defer tick.Stop()
		for {
			p.round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// HeartbeatRetry is the wait before a failed heartbeat is tried again,
// rather than the whole interval: a store that refused it (a full disk, a
// restart) and works again sees the worker alive, and /healthz healthy,
// within it.
const HeartbeatRetry = 250 * time.Millisecond

// heartbeat beats every interval, and HeartbeatRetry after a beat that
// failed; the worker writes the first beat before it claims and passes
// its outcome. A run of failed beats is logged at its first, about every
// 10 seconds after, and when a beat is stored again.
type heartbeat struct {
	lifecycle
	health Heartbeater
	id     string
	every  time.Duration
	first  error
	log    *slog.Logger
}

// Start starts the beats.
func (h *heartbeat) Start(ctx context.Context) {
	h.start(ctx, func(ctx context.Context) {
		failures := 0
		next := func(err error) time.Duration {
			switch {
			case err == nil:
				if failures > 0 {
					h.log.Info("heartbeat stored again", "failures", failures)
				}
				failures = 0
				return h.every
			case ctx.Err() == nil:
				if failures++; failures%40 == 1 {
					h.log.Error("heartbeat", "error", err.Error(), "failures", failures)
				}
			}
			return min(h.every, HeartbeatRetry)
		}
		timer := time.NewTimer(next(h.first))
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
				timer.Reset(next(h.health.Heartbeat(ctx, h.id)))
			}
		}
	})
}

// expireBatch bounds the tasks one sweep statement expires; a sweep runs
// statements until one expires fewer.
const expireBatch = 500

// expirySweep expires the tasks whose deadline has passed, at start and
// then every interval. Any number of workers may sweep at once: each task
// expires once.
func expirySweep(queue arbiter.QueueService, every time.Duration, log *slog.Logger) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		for {
			ids, err := queue.ExpireTasks(ctx, expireBatch)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("expire tasks", "error", err.Error())
				}
				return
			}
			if len(ids) > 0 {
				log.Info("expired tasks past their deadline", "count", len(ids))
			}
			if len(ids) < expireBatch {
				return
			}
		}
	}}
}

// demoPruning prunes the demo verdicts older than arbiter.DemoVerdictMaxAge
// and beyond the newest arbiter.DemoVerdictsKept, at start and then every
// interval.
func demoPruning(demo DemoPruner, every time.Duration, log *slog.Logger) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		n, err := demo.PruneDemoVerdicts(ctx, arbiter.DemoVerdictMaxAge, arbiter.DemoVerdictsKept)
		if err != nil && ctx.Err() == nil {
			log.Error("prune demo verdicts", "error", err.Error())
		} else if n > 0 {
			log.Info("pruned demo verdicts", "deleted", n)
		}
	}}
}

// keyPruning prunes the idempotency keys whose retention ended
// (Worker.PruneIdempotencyKeys), at start and then every interval.
func keyPruning(w *Worker, every time.Duration) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		if err := w.PruneIdempotencyKeys(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("prune idempotency keys", "error", err.Error())
		}
	}}
}

// digestQueueing queues the reviewers' digests and the drift mails due
// (Worker.QueueDigests), at start and then every interval.
func digestQueueing(w *Worker, every time.Duration) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		if _, err := w.QueueDigests(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("queue digests", "error", err.Error())
		}
	}}
}

// alertBatch bounds the tasks one alert round takes at once; a round
// takes batches until one holds fewer.
const alertBatch = 200

// alertFiring fires the reminders and escalation rungs due
// (Worker.FireAlerts), at start and then every interval.
func alertFiring(w *Worker, every time.Duration) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		if _, err := w.FireAlerts(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("fire reminders and escalations", "error", err.Error())
		}
	}}
}

// pruneBatch bounds the messages one prune statement deletes.
const pruneBatch = 1000

// webhookPruning deletes the delivered and failed webhook messages older
// than arbiter.WebhookRetention, at start and then every interval.
func webhookPruning(store arbiter.WebhookDeliveryService, now arbiter.Clock, every time.Duration, log *slog.Logger) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		for {
			n, err := store.PruneWebhookMessages(ctx, arbiter.TimestampOf(now().Add(-arbiter.WebhookRetention)), pruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("prune webhook messages", "error", err.Error())
				}
				return
			}
			if n < pruneBatch {
				return
			}
		}
	}}
}

// mailPruning deletes the sent and failed mails older than
// arbiter.MailRetention, at start and then every interval.
func mailPruning(store arbiter.MailDeliveryService, now arbiter.Clock, every time.Duration, log *slog.Logger) *periodic {
	return &periodic{every: every, round: func(ctx context.Context) {
		for {
			n, err := store.PruneMail(ctx, arbiter.TimestampOf(now().Add(-arbiter.MailRetention)), pruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("prune mail", "error", err.Error())
				}
				return
			}
			if n < pruneBatch {
				return
			}
		}
	}}
}
