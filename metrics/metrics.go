// Package metrics exposes Arbiter's Prometheus metrics: requests by route
// and status, tasks created, tasks waiting by status, the worker's claims
// and verifier calls, webhook deliveries and their failures, and the API
// key cache. `arbiter serve` and `arbiter
// worker` serve them on their own listener (ARBITER_METRICS_ADDR), never
// on the public one.
//
// The metrics are fed through small hooks (web.Router.Metrics,
// web.KeyChecker.Observe, worker.Config.Observer,
// worker.WebhookConfig.Observer), so those packages do not import
// Prometheus.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/arbiterhq/arbiter"
)

// Metrics holds the collectors, on a registry of their own (with the Go
// runtime's and the process's).
type Metrics struct {
	registry *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	tasksCreated    prometheus.Counter
	tasksOpen       *prometheus.GaugeVec
	drifted         prometheus.Gauge
	claimed         prometheus.Counter
	claims          prometheus.Counter
	verifier        *prometheus.HistogramVec
	verifierErrors  *prometheus.CounterVec
	keyChecks       *prometheus.CounterVec
	webhookAttempts *prometheus.HistogramVec
	webhookFailures *prometheus.CounterVec
	webhooks        prometheus.Observer
}

// New returns the metrics, registered.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "arbiter_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern, method and status; long-polls included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method", "status"}),
		tasksCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbiter_tasks_created_total",
			Help: "Tasks stored by POST /v1/tasks and /v1/tasks/batch (replays not counted).",
		}),
		tasksOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "arbiter_tasks",
			Help: "Tasks not yet final, by status, from a periodic count over the store's queue indexes.",
		}, []string{"status"}),
		drifted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "arbiter_calibration_drifted_accounts",
			Help: "Accounts whose audited error rate has drifted above the target (arbiter.NextDrift), from the same periodic count.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbiter_worker_claimed_tasks_total",
			Help: "Tasks the worker leased.",
		}),
		claims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbiter_worker_claims_total",
			Help: "Claim statements the worker ran, whether they found tasks or not.",
		}),
		verifier: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "arbiter_verifier_duration_seconds",
			Help:    "Time of a verifier call, by outcome (ok, error or throttled).",
			Buckets: []float64{.0001, .001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"outcome"}),
		verifierErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_verifier_errors_total",
			Help: "Failed verifier calls, by the reason the attempt records.",
		}, []string{"reason"}),
		keyChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_key_checks_total",
			Help: "API key checks of well-formed keys, by whether the key cache answered (hit) or the store (miss).",
		}, []string{"cache"}),
		webhookAttempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "arbiter_webhook_delivery_duration_seconds",
			Help:    "Time of a webhook delivery attempt, to its answer or its failure, by outcome (delivered or failed).",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		}, []string{"outcome"}),
		webhookFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbiter_webhook_delivery_failures_total",
			Help: "Webhook delivery attempts that failed (no 2xx answer), by whether they failed the message for good (final=true) or left it to a retry.",
		}, []string{"final"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestDuration, m.tasksCreated, m.tasksOpen, m.drifted, m.claimed, m.claims,
		m.verifier, m.verifierErrors, m.keyChecks, m.webhookAttempts, m.webhookFailures,
	)
	m.webhooks = m.webhookAttempts.WithLabelValues("delivered")
	// The series exist from the start, so a rate over them is 0, not
	// absent, before the first failure.
	m.webhookFailures.WithLabelValues("false")
	m.webhookFailures.WithLabelValues("true")
	return m
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// ObserveRequest records an answered request. route is the pattern the
// router matched ("/v1/tasks/{id}"), never the path, so ids do not become
// labels; "" (nothing matched) is recorded as "unmatched".
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	labels := prometheus.Labels{"route": route, "method": method, "status": strconv.Itoa(status)}
	m.requests.With(labels).Inc()
	m.requestDuration.With(labels).Observe(d.Seconds())
}

// TasksCreated counts n stored tasks.
func (m *Metrics) TasksCreated(n int) { m.tasksCreated.Add(float64(n)) }

// Claimed counts a claim statement that leased n tasks.
func (m *Metrics) Claimed(n int) {
	m.claims.Inc()
	m.claimed.Add(float64(n))
}

// Verified records a verifier call that took d and failed with err (nil
// when it answered). A throttled call (*arbiter.ThrottledError) has its own
// outcome and is no failure.
func (m *Metrics) Verified(d time.Duration, err error) {
	outcome := "ok"
	var throttled *arbiter.ThrottledError
	switch {
	case errors.As(err, &throttled):
		outcome = "throttled"
	case err != nil:
		outcome = "error"
		m.verifierErrors.WithLabelValues(arbiter.VerifierFailureReason(err)).Inc()
	}
	m.verifier.WithLabelValues(outcome).Observe(d.Seconds())
}

// WebhookAttempted records a webhook delivery attempt that took d and
// delivered its message, or failed (for good when failed).
func (m *Metrics) WebhookAttempted(d time.Duration, delivered, failed bool) {
	if delivered {
		m.webhooks.Observe(d.Seconds())
		return
	}
	m.webhookAttempts.WithLabelValues("failed").Observe(d.Seconds())
	m.webhookFailures.WithLabelValues(strconv.FormatBool(failed)).Inc()
}

// KeyChecked records a key check answered from the cache (cached) or
// looked up in the store.
func (m *Metrics) KeyChecked(cached bool) {
	if cached {
		m.keyChecks.WithLabelValues("hit").Inc()
	} else {
		m.keyChecks.WithLabelValues("miss").Inc()
	}
}

// OpenTaskCounter counts the tasks that are not final, by status; the db
// package's *DB implements it with one count per queue index.
type OpenTaskCounter interface {
	CountOpenTasks(ctx context.Context) (map[string]int, error)
}

// DriftCounter counts the accounts whose audited error rate has drifted;
// the db package's *DB implements it.
type DriftCounter interface {
	CountDriftedAccounts(ctx context.Context) (int, error)
}

// CountOpenTasksEvery sets the tasks gauge from store at once and then
// every interval until ctx ends, and the drifted accounts' gauge when
// store is a DriftCounter too.
func (m *Metrics) CountOpenTasksEvery(ctx context.Context, store OpenTaskCounter, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		counts, err := store.CountOpenTasks(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("count open tasks for metrics", "error", err.Error())
			}
		} else {
			for status, n := range counts {
				m.tasksOpen.WithLabelValues(status).Set(float64(n))
			}
		}
		if dc, ok := store.(DriftCounter); ok {
			if n, err := dc.CountDriftedAccounts(ctx); err == nil {
				m.drifted.Set(float64(n))
			} else if ctx.Err() == nil {
				log.Warn("count drifted accounts for metrics", "error", err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
