// Package worker is the agent tier's engine: it claims pending tasks under a
// lease, asks the verifier, records each call as an attempt and routes the
// task to a decision, a retry or a human.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// Heartbeater records that a worker is alive; /healthz reads it.
type Heartbeater interface {
	Heartbeat(ctx context.Context, workerID string) error
	RemoveWorker(ctx context.Context, workerID string) error
}

// DemoPruner deletes old demo verdicts, so anonymous visitors cannot grow
// the store without bound; the db package's *DB implements it.
type DemoPruner interface {
	// PruneDemoVerdicts deletes the demo verdicts older than maxAge and
	// the oldest beyond the newest keep, and returns how many it deleted.
	PruneDemoVerdicts(ctx context.Context, maxAge time.Duration, keep int) (int64, error)
}

// Observer receives what the worker does, for metrics (metrics.Metrics
// implements it).
type Observer interface {
	// Claimed is called after each claim statement with the tasks it
	// leased.
	Claimed(n int)
	// Verified is called after each verifier call with its duration and
	// its error (nil when it answered).
	Verified(d time.Duration, err error)
}

// Pacer is a verifier backend whose calls take turns with its provider
// (the openai backend's limiter, one per backend): the worker waits for
// each call's turn before the call's time limit starts.
type Pacer interface {
	// Pace waits for the next call's turn, up to maxWait. A turn further
	// away is a *arbiter.ThrottledError, for the task to wait the rest in
	// the queue; ctx's end is ctx's error.
	Pace(ctx context.Context, maxWait time.Duration) error
}

// InProcessVerifier is a verifier backend whose calls are answered in the
// process as soon as they are made, with no outside call and no turn to
// wait for (the agent package's rules and none backends). The worker
// claims for it with its calls marked started in the claim's own statement
// (arbiter.QueueService.ClaimTasksStarted) rather than in a second one:
// between its claim and its call there is nothing that can be lost but the
// worker itself, so a lease that runs out still counts a lost call.
type InProcessVerifier interface {
	// InProcess reports whether every call is answered in the process.
	InProcess() bool
}

// VerifierSet is the agent tier's verifiers by name, with the default
// cascade (the agent package's Verifiers, built from a verifiers file or
// from ARBITER_AGENT*).
type VerifierSet interface {
	// Cascade names the verifiers a task's claims ask, in order, when its
	// policy names none.
	Cascade() []string
	// Verifier returns the verifier named name and what the file says of
	// it; false when there is none.
	Verifier(name string) (arbiter.Verifier, arbiter.VerifierSpec, bool)
}

// AgentPolicies gives the policy that governs a task for the agent tier:
// its type's, else the default policy, else nil (the db package's
// AgentPolicy).
type AgentPolicies interface {
	AgentPolicy(ctx context.Context, accountID, taskType string) (*arbiter.Policy, error)
}

// CertifiedThresholds gives the threshold a verifier's certificate gives
// at a target (the db package's CertifiedThreshold): the labels of its
// answers at version on the account's tasks of taskType; nil when none is
// certified yet.
type CertifiedThresholds interface {
	CertifiedThreshold(ctx context.Context, accountID, taskType, verifier, version string, target arbiter.ErrorTarget) (*float64, error)
}

// DefaultCertificateFor is how long a worker keeps a verifier's
// certificate: a certified threshold follows the audits within a minute,
// and reads them at most once a minute per task type and verifier.
const DefaultCertificateFor = time.Minute

// maxKeptCertificates bounds the certificates a worker keeps; it forgets
// them all when full.
const maxKeptCertificates = 4096

// Config configures a Worker. Zero values take the defaults.
type Config struct {
	// Queue is the store the worker claims from and records to (required).
	Queue arbiter.QueueService
	// Verifiers are the cascade's verifiers. When nil, Verifier alone is
	// the cascade, named DefaultVerifierName.
	Verifiers VerifierSet
	// Verifier answers each claimed task when Verifiers is nil.
	Verifier arbiter.Verifier
	// Policies, when set, gives each task's policy: its cascade, its
	// thresholds per verifier and its require_person_if. Without it every
	// task takes the default cascade at its own threshold.
	Policies AgentPolicies
	// Certificates, when set, gives the thresholds of a certified
	// policy's verifiers: each one's certificate, kept for
	// CertificateFor. Without it a certified policy's verifiers decide
	// nothing.
	Certificates CertifiedThresholds
	// CertificateFor is how long a verifier's certificate is kept before
	// it is read again (default DefaultCertificateFor).
	CertificateFor time.Duration
	// Health receives the worker's heartbeats (required).
	Health Heartbeater
	// Logger receives claim, record and heartbeat failures (default
	// slog.Default()).
	Logger *slog.Logger
	// Observer, when set, is told of each claim and verifier call.
	Observer Observer
	// Now stamps the attempts' started_at and finished_at (default
	// time.Now).
	Now arbiter.Clock
	// Version is the verifier version label recorded on each agent
	// attempt (ARBITER_AGENT_VERSION) whose verifier sets none of its
	// own; "" records none.
	Version string
	// Backend names the verifier's backend (ARBITER_AGENT), when Verifiers
	// does not, on the spans of
	// its calls.
	Backend string

	// ID names this worker in leases and heartbeats (default wrk_ + random).
	ID string
	// Concurrency bounds the verifier calls in flight (default
	// DefaultConcurrency).
	Concurrency int
	// AttemptTimeout bounds one verifier call (default
	// DefaultAttemptTimeout). It is the call's one time limit: the
	// verifier takes it from the context and says in its own words that
	// it ran out.
	AttemptTimeout time.Duration
	// Lease is how long a claim holds (default twice AttemptTimeout plus
	// 10s). Leases are not renewed: a lease outlives the call and its
	// recording, so it only expires when its worker vanished. A Lease
	// shorter than AttemptTimeout plus 10s is raised to that.
	Lease time.Duration
	// Grace is how long in-flight calls may finish after Run's context
	// ends (default DefaultGrace); the leases of the rest are released.
	Grace time.Duration
	// Poll is the wait between claims when the queue is empty (default
	// 500ms); Notify and Created cut it short.
	Poll time.Duration
	// Created, when set, receives when tasks were created, in this
	// process or another (the db package's TasksCreated), so the worker
	// claims them at once rather than at its next poll.
	Created <-chan struct{}
	// ClaimCooldown is the least time between two claims (default
	// DefaultClaimCooldown), so that calls finishing one after another
	// free their slots for one claim of many tasks rather than many
	// claims of one; River's FetchCooldown.
	ClaimCooldown time.Duration
	// Backoff is the wait before the first retry of a failed call; it
	// doubles with each failure (default 1s). A throttled call waits what
	// its error asks instead (arbiter.NextAgentStep).
	Backoff time.Duration
	// Heartbeat is the interval between heartbeats (default 5s).
	Heartbeat time.Duration
	// Demo, when set, has its demo verdicts pruned at start and every
	// PruneEvery (default 1h): those older than arbiter.DemoVerdictMaxAge
	// and beyond the newest arbiter.DemoVerdictsKept.
	Demo       DemoPruner
	PruneEvery time.Duration
	// Keys, when set, has its expired idempotency keys deleted at start
	// and every PruneKeysEvery (default 1m), so that requests never wait
	// for it.
	Keys           arbiter.IdempotencyKeyService
	PruneKeysEvery time.Duration
	// ExpireEvery is how often the worker expires the tasks whose deadline
	// has passed (default DefaultExpireEvery), so a task expires within
	// that of its deadline. Any number of workers may sweep at once: each
	// task expires once.
	ExpireEvery time.Duration
	// Digests, when set, has the worker queue the reviewers' digests and
	// the calibration drift mails due (arbiter.NotificationService) in the
	// mail outbox at start and every DigestEvery (default
	// DefaultDigestEvery); the mail deliverer sends them.
	Digests     arbiter.NotificationService
	DigestEvery time.Duration
	// Alerts, when set, has the worker fire the reminders and escalation
	// rungs due (arbiter.AlertService) at start and every AlertEvery
	// (default DefaultAlertEvery); their webhooks, Slack questions and
	// mails go through the outboxes.
	Alerts     arbiter.AlertService
	AlertEvery time.Duration
}

// Defaults of Config, which the server's settings also show.
const (
	DefaultConcurrency    = 8
	DefaultAttemptTimeout = 30 * time.Second
	DefaultGrace          = 10 * time.Second
	DefaultExpireEvery    = time.Second
	DefaultClaimCooldown  = 2 * time.Millisecond
	DefaultDigestEvery    = time.Minute
	DefaultAlertEvery     = 5 * time.Second
)

// recordTimeout bounds a store call that records an attempt or, at
// shutdown, releases leases and removes the heartbeat.
const recordTimeout = 10 * time.Second

// leaseCalls is the Slack and Teams deliverers' rule for a lease: this many
// times the bound of an attempt's calls (CallTimeout), the calls and as
// long again for the store's calls around them (the turn taken, the
// record), so that no other process claims a message while its call is in
// flight. DefaultSlackLease and DefaultTeamsLease are the rule applied to
// the clients' own timeouts.
const leaseCalls = 2

// Worker runs verifier calls on claimed tasks. Create it with New.
type Worker struct {
	cfg   Config
	retry arbiter.AgentRetry
	set   VerifierSet
	// inProcess is set when every verifier answers in the process and
	// none paces its calls: claims mark the calls started.
	inProcess bool
	// certificates keeps the verifiers' certified thresholds
	// (certificate).
	certMu       sync.Mutex
	certificates map[certificateKey]keptCertificate
	log          *slog.Logger
	claimer      *Claimer[agentCall]
	// batch holds the calls of the last claim until the claimer has read
	// them; the claim loop alone uses it.
	batch []agentCall
}

// agentCall is a claimed task's call: the task, when it was claimed, and
// a channel closed once the claim's calls are marked started in the store.
type agentCall struct {
	task    *arbiter.Task
	claimed time.Time
	marked  <-chan struct{}
}

// New returns a worker; Run starts it.
func New(cfg Config) *Worker {
	if cfg.ID == "" {
		cfg.ID = arbiter.NewID("wrk_", 8)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	set := cfg.Verifiers
	if set == nil {
		set = oneVerifier{cfg.Verifier}
	}
	// The lease outlives the longest call any verifier may make.
	longest := cfg.AttemptTimeout
	for _, name := range allVerifiers(set) {
		if _, spec, ok := set.Verifier(name); ok {
			longest = max(longest, spec.Timeout)
		}
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2*longest + 10*time.Second
	} else if cfg.Lease < longest+recordTimeout {
		cfg.Lease = longest + recordTimeout
	}
	if cfg.CertificateFor <= 0 {
		cfg.CertificateFor = DefaultCertificateFor
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.ClaimCooldown <= 0 {
		cfg.ClaimCooldown = DefaultClaimCooldown
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Hour
	}
	if cfg.ExpireEvery <= 0 {
		cfg.ExpireEvery = DefaultExpireEvery
	}
	if cfg.DigestEvery <= 0 {
		cfg.DigestEvery = DefaultDigestEvery
	}
	if cfg.AlertEvery <= 0 {
		cfg.AlertEvery = DefaultAlertEvery
	}
	if cfg.PruneKeysEvery <= 0 {
		cfg.PruneKeysEvery = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Worker{cfg: cfg, set: set, log: cfg.Logger.With("worker", cfg.ID)}
	w.retry = arbiter.AgentRetry{Backoff: w.backoff, CallTimeout: cfg.AttemptTimeout}
	w.inProcess = true
	for _, name := range allVerifiers(set) {
		v, _, _ := set.Verifier(name)
		_, paces := v.(Pacer)
		in, ok := v.(InProcessVerifier)
		w.inProcess = w.inProcess && !paces && ok && in.InProcess()
	}
	w.claimer = NewClaimer(ClaimerConfig[agentCall]{
		Claim: w.claim,
		Work: func(calls context.Context, c agentCall, free func()) {
			w.work(calls, c.task, c.claimed, c.marked, free)
		},
		Release: func(ctx context.Context) {
			if err := w.cfg.Queue.ReleaseTasks(ctx, w.cfg.ID); err != nil {
				w.log.Error("release leases", "error", err.Error())
			}
		},
		Slots: cfg.Concurrency, Finishing: min(finishingPerSlot*cfg.Concurrency, maxFinishing), Cooldown: cfg.ClaimCooldown, Poll: cfg.Poll, Wake: cfg.Created,
		Grace: cfg.Grace,
		GraceEnded: func() {
			w.log.Warn("calls outlived the grace period; releasing their tasks", "grace", w.cfg.Grace)
		},
	})
	return w
}

// Notify wakes the claim loop at once, for a task just created. It never
// blocks.
func (w *Worker) Notify() { w.claimer.Notify() }

// Run claims and works tasks until ctx ends. Then it stops claiming, lets
// calls in flight finish within the grace period, cancels the rest and
// releases their leases, so their tasks are claimed again elsewhere. The
// maintenance services run from before the first claim until after the
// release.
func (w *Worker) Run(ctx context.Context) {
	maintain := context.WithoutCancel(ctx)
	// The first beat is written before any claim, so a task this worker
	// decided is never seen before the worker's heartbeat.
	first := w.cfg.Health.Heartbeat(maintain, w.cfg.ID)
	services := []service{
		&heartbeat{health: w.cfg.Health, id: w.cfg.ID, every: w.cfg.Heartbeat, first: first, log: w.log},
		expirySweep(w.cfg.Queue, w.cfg.ExpireEvery, w.log),
	}
	if w.cfg.Demo != nil {
		services = append(services, demoPruning(w.cfg.Demo, w.cfg.PruneEvery, w.log))
	}
	if w.cfg.Keys != nil {
		services = append(services, keyPruning(w, w.cfg.PruneKeysEvery))
	}
	if w.cfg.Digests != nil {
		services = append(services, digestQueueing(w, w.cfg.DigestEvery))
	}
	if w.cfg.Alerts != nil {
		services = append(services, alertFiring(w, w.cfg.AlertEvery))
	}
	for _, s := range services {
		s.Start(maintain)
	}

	w.claimer.Run(ctx)

	for _, s := range services {
		s.Stop()
	}
	final, cancel := context.WithTimeout(maintain, recordTimeout)
	defer cancel()
	if err := w.cfg.Health.RemoveWorker(final, w.cfg.ID); err != nil {
		w.log.Error("remove heartbeat", "error", err.Error())
	}
}

// markedByTheClaim is the marked channel of calls whose claim marked them
// started (InProcessVerifier).
var markedByTheClaim = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// claim claims up to n tasks and returns their calls, once it has started
// marking them started in the store (startCalls), or with the calls marked
// by the claim itself for a verifier that answers in the process.
func (w *Worker) claim(ctx context.Context, n int) []agentCall {
	claimed := time.Now()
	claimTasks := w.cfg.Queue.ClaimTasks
	if w.inProcess {
		claimTasks = w.cfg.Queue.ClaimTasksStarted
	}
	tasks, err := claimTasks(ctx, w.cfg.ID, n, w.cfg.Lease)
	if err != nil && ctx.Err() == nil {
		w.log.Error("claim tasks", "error", err.Error())
	}
	if w.cfg.Observer != nil && err == nil {
		w.cfg.Observer.Claimed(len(tasks))
	}
	w.batch = w.batch[:0]
	if len(tasks) == 0 {
		return w.batch
	}
	if w.inProcess {
		for _, t := range tasks {
			w.batch = append(w.batch, agentCall{task: t, claimed: claimed, marked: markedByTheClaim})
		}
		return w.batch
	}
	// The calls are marked started in the store before they are made,
	// while they wait for their turn.
	marked := make(chan struct{})
	w.claimer.Go(func(calls context.Context) { w.startCalls(calls, tasks, marked) })
	for _, t := range tasks {
		w.batch = append(w.batch, agentCall{task: t, claimed: claimed, marked: marked})
	}
	return w.batch
}

// startCalls marks the calls of the claimed tasks started in the store
// (arbiter.QueueService.StartAgentCalls), all but those of tasks lost too
// often, which get none, and closes marked.
func (w *Worker) startCalls(calls context.Context, tasks []*arbiter.Task, marked chan<- struct{}) {
	defer close(marked)
	var ids []string
	for _, t := range tasks {
		if _, lost := arbiter.LostAgentStep(t, w.cfg.Now()); !lost {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(calls, recordTimeout)
	defer cancel()
	if err := w.cfg.Queue.StartAgentCalls(ctx, w.cfg.ID, ids); err != nil && calls.Err() == nil {
		// The calls go ahead all the same: the worker holds their
		// leases. Only losing this worker during them goes uncounted.
		w.log.Error("mark calls started", "error", err.Error())
	}
}

// finishingPerSlot and maxFinishing bound the records in flight, whose
// calls have given their slots back: four a slot, at most 1,000 (one
// grouped finish of the store). Without them the slots bound the records
// too, and a worker whose verifier answers at once (the rules backend)
// decides no more than its slots a finish's latency.
const (
	finishingPerSlot = 4
	maxFinishing     = 1000
)

// work makes one call of t's cascade, claimed at claimed, and records it,
// once the call is marked started (marked closed): the call to the
// verifier of the stage t is at (arbiter.StageOf), under t's policy. A
// call cut off by the end of the grace period records nothing: its lease
// is released instead. A task whose calls were lost with their workers too
// often gets no call (arbiter.LostAgentStep), nor does one whose policy
// requires a person (require_person_if) or whose stage names a verifier
// this worker does not have (arbiter.SkipStep). A verifier that paces its
// calls is waited for first, as long as the lease leaves room for the call
// and its record; a turn further away is a throttled call, made in the
// queue. Once the call is made it gives its slot back (free) for the
// record, so that a slow store bounds the calls no more than the records'
// own bound (ClaimerConfig.Finishing).
func (w *Worker) work(calls context.Context, t *arbiter.Task, claimed time.Time, marked <-chan struct{}, free func()) {
	// The agent decision joins the trace of t's create as its child, with
	// the verifier's call and the record (and what the record queues)
	// under it.
	calls, span := startAgentSpan(calls, t, claimed)
	var step arbiter.AgentStep
	defer func() { endAgentSpan(span, step) }()
	step, lost := arbiter.LostAgentStep(t, w.cfg.Now())
	if !lost {
		step = w.call(calls, t, claimed, marked)
		if calls.Err() != nil {
			return
		}
	}
	free()
	switch {
	case step.Throttled:
		w.log.Debug("verifier call throttled", "task", t.ID, "run_after", step.RunAfter.Time(), "error", step.Err.Error())
	case step.Err != nil:
		// The attempt records the reason; the full error is logged here,
		// once.
		w.log.Warn("verifier call failed", "task", t.ID, "reason", *step.Attempt.Error,
			"next", step.Next, "error", step.Err.Error())
	}
	// The record is sent again while the store is unavailable, until the
	// lease ends or the worker stops (recordAgain).
	again, err := recordAgain(calls, calls.Done(), claimed.Add(w.cfg.Lease), func(ctx context.Context) error {
		return w.cfg.Queue.FinishAgentAttempt(ctx, w.cfg.ID, t.ID, step)
	})
	if err != nil {
		switch {
		case recordedBeforeTheStoreWasLost(again, err):
			w.log.Info("attempt recorded before the store was lost, or its lease ran out", "task", t.ID, "reason", arbiter.ErrorMessage(err))
			return
		case arbiter.ErrorCode(err) == arbiter.ECONFLICT:
			// The lease or the task's deadline ran out during the call;
			// the store changed nothing.
			w.log.Warn("attempt not recorded", "task", t.ID, "reason", arbiter.ErrorMessage(err))
			return
		}
		w.log.Error("record attempt", "task", t.ID, "error", err.Error())
		return
	}
	w.log.Debug("attempt", "task", t.ID, "next", step.Next)
}

// call makes the call of t's cascade that is due and returns its step.
func (w *Worker) call(calls context.Context, t *arbiter.Task, claimed time.Time, marked <-chan struct{}) arbiter.AgentStep {
	policy := w.policy(calls, t)
	if policy != nil && policy.Agent.RequirePersonIf != "" {
		matched, err := arbiter.RequirePerson(policy.Agent.RequirePersonIf, t)
		if err != nil {
			w.log.Warn("require_person_if did not evaluate; the cascade goes on", "task", t.ID, "error", err.Error())
		}
		if matched {
			<-marked
			return arbiter.RequirePersonStep(policy.Agent.RequirePersonIf, w.cfg.Now())
		}
	}
	var certified arbiter.Certificates
	if policy != nil && policy.Agent.Certified != nil && w.cfg.Certificates != nil {
		target := *policy.Agent.Certified
		certified = func(name string) *float64 { return w.certificate(calls, t, name, target) }
	}
	stages := arbiter.PlanCascade(t, policy, w.set.Cascade(), certified)
	stage := min(arbiter.StageOf(t, stages), len(stages)-1)
	verifier, spec, ok := w.set.Verifier(stages[stage].Verifier)
	if !ok {
		<-marked
		return arbiter.SkipStep(stages, stage, w.cfg.Now())
	}
	var v arbiter.Verification
	err := w.pace(calls, verifier, claimed)
	<-marked
	started := w.cfg.Now()
	if err == nil {
		timeout := w.cfg.AttemptTimeout
		if spec.Timeout > 0 {
			timeout = spec.Timeout
		}
		callCtx, cancel := context.WithTimeout(calls, timeout)
		v, err = w.verify(callCtx, verifier, spec, t)
		cancel()
		if w.cfg.Observer != nil && calls.Err() == nil {
			w.cfg.Observer.Verified(w.cfg.Now().Sub(started), err)
		}
	}
	step := arbiter.NextCascadeStep(t, stages, stage, v, err, started, w.cfg.Now(), w.retry)
	if !step.Throttled {
		step.Attempt.Cost = arbiter.CostOf(spec.Price, v.Usage)
		if version := w.versionOf(spec); version != "" {
			step.Attempt.Version = &version
		}
	}
	return step
}

// versionOf is the version label recorded on the attempts of the verifier
// spec describes: its own, else ARBITER_AGENT_VERSION's.
func (w *Worker) versionOf(spec arbiter.VerifierSpec) string {
	if spec.Version != "" {
		return spec.Version
	}
	return w.cfg.Version
}

// certificateKey names a verifier's certificate: its series (name and
// version) on an account's tasks of a type, at a target.
type certificateKey struct {
	accountID, taskType, verifier, version string
	target                                 arbiter.ErrorTarget
}

// keptCertificate is a certified threshold (nil: none yet) and when it is
// to be read again.
type keptCertificate struct {
	threshold *float64
	until     time.Time
}

// certificate returns the threshold the certificate of the verifier named
// name gives t's account and type at target, kept for CertificateFor; nil
// when there is none yet, or it could not be read (logged): that verifier
// then passes t on, as a new one does.
func (w *Worker) certificate(ctx context.Context, t *arbiter.Task, name string, target arbiter.ErrorTarget) *float64 {
	_, spec, ok := w.set.Verifier(name)
	if !ok {
		return nil
	}
	key := certificateKey{accountID: t.AccountID, taskType: t.TaskType, verifier: name, version: w.versionOf(spec), target: target}
	now := w.cfg.Now()
	w.certMu.Lock()
	kept, ok := w.certificates[key]
	w.certMu.Unlock()
	if ok && now.Before(kept.until) {
		return kept.threshold
	}
	threshold, err := w.cfg.Certificates.CertifiedThreshold(ctx, t.AccountID, t.TaskType, name, key.version, target)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Error("read a verifier's certificate; it passes the task on", "task", t.ID, "verifier", name, "error", err.Error())
		}
		return nil
	}
	w.certMu.Lock()
	if w.certificates == nil || len(w.certificates) >= maxKeptCertificates {
		w.certificates = map[certificateKey]keptCertificate{}
	}
	w.certificates[key] = keptCertificate{threshold: threshold, until: now.Add(w.cfg.CertificateFor)}
	w.certMu.Unlock()
	return threshold
}

// policy returns the policy that governs t for the agent tier, nil when
// there is none or it could not be read (logged: the task then takes the
// default cascade at its own threshold rather than wait).
func (w *Worker) policy(ctx context.Context, t *arbiter.Task) *arbiter.Policy {
	if w.cfg.Policies == nil {
		return nil
	}
	p, err := w.cfg.Policies.AgentPolicy(ctx, t.AccountID, t.TaskType)
	if err != nil && ctx.Err() == nil {
		w.log.Error("read the task's policy", "task", t.ID, "error", err.Error())
	}
	return p
}

// pace waits for the call's turn when the verifier paces its calls, as
// long as the lease of a task claimed at claimed leaves room for the call
// and its record.
func (w *Worker) pace(ctx context.Context, v arbiter.Verifier, claimed time.Time) error {
	pacer, ok := v.(Pacer)
	if !ok {
		return nil
	}
	room := w.cfg.Lease - w.cfg.AttemptTimeout - recordTimeout - time.Since(claimed)
	return pacer.Pace(ctx, max(room, 0))
}

// verify calls the verifier, turning a panic in a backend into a failed
// attempt rather than a dead process.
func (w *Worker) verify(ctx context.Context, v arbiter.Verifier, spec arbiter.VerifierSpec, t *arbiter.Task) (out arbiter.Verification, err error) {
	backend := spec.Backend
	if backend == "" {
		backend = w.cfg.Backend
	}
	ctx, span := telemetry.StartChild(ctx, "verifier call", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("arbiter.task_id", t.ID), attribute.String("arbiter.verifier.backend", backend),
			attribute.String("arbiter.verifier.name", spec.Name))
	}
	defer func() { endVerifierSpan(span, out, err, spec.Price) }()
	defer func() {
		if p := recover(); p != nil {
			err = &arbiter.VerifierError{Reason: arbiter.VerifierFailed, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return v.Verify(ctx, t)
}

// DefaultVerifierName names Config.Verifier when it is the whole cascade.
const DefaultVerifierName = "agent"

// oneVerifier is a cascade of Config.Verifier alone.
type oneVerifier struct{ v arbiter.Verifier }

func (o oneVerifier) Cascade() []string { return []string{DefaultVerifierName} }

func (o oneVerifier) Verifier(name string) (arbiter.Verifier, arbiter.VerifierSpec, bool) {
	if name != DefaultVerifierName || o.v == nil {
		return nil, arbiter.VerifierSpec{}, false
	}
	return o.v, arbiter.VerifierSpec{Name: DefaultVerifierName}, true
}

// allVerifiers names the set's verifiers a cascade may ask: those of its
// default cascade (a policy's names only those).
func allVerifiers(set VerifierSet) []string { return set.Cascade() }

// backoff is the wait before retrying a task that failed failures times.
func (w *Worker) backoff(failures int) time.Duration {
	return w.cfg.Backoff << min(failures, 10)
}

// PruneIdempotencyKeys deletes the idempotency keys whose retention ended,
// once; Run does it every PruneKeysEvery when Keys is set. Several workers
// may prune at once: a key is deleted once.
func (w *Worker) PruneIdempotencyKeys(ctx context.Context) error {
	if w.cfg.Keys == nil {
		return nil
	}
	n, err := w.cfg.Keys.PruneIdempotencyKeys(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		w.log.Debug("pruned idempotency keys", "count", n)
	}
	return nil
}

// QueueDigests queues the digests due in the mail outbox, each once, and
// then the calibration drift mails (arbiter.DriftMail); Run does it every
// DigestEvery when Digests is set. A digest is claimed in the store as it
// is queued, so several workers never queue one twice. It returns how
// many mails it queued.
func (w *Worker) QueueDigests(ctx context.Context) (int, error) {
	if w.cfg.Digests == nil {
		return 0, nil
	}
	digests, err := w.cfg.Digests.ClaimDigests(ctx, arbiter.MaxDigestsPerRound)
	if err != nil {
		return 0, err
	}
	drifts, err := w.cfg.Digests.ClaimDriftMails(ctx, arbiter.MaxDigestsPerRound)
	return digests + drifts, err
}

// FireAlerts fires the reminders and escalation rungs due, a batch of
// tasks at a time until none is left; Run does it every AlertEvery when
// Alerts is set. Each step is claimed in the store as it fires, so
// several workers never fire one twice; its mails are queued in the mail
// outbox. It returns how many tasks it took.
func (w *Worker) FireAlerts(ctx context.Context) (int, error) {
	if w.cfg.Alerts == nil {
		return 0, nil
	}
	taken := 0
	for {
		n, err := w.cfg.Alerts.FireDueAlerts(ctx, alertBatch)
		taken += n
		if err != nil || n < alertBatch {
			return taken, err
		}
	}
}
