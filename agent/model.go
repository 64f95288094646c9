package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

// RateLimiter paces one verifier's calls to its provider (Limiter in one
// process). It is an interface so that a limiter shared by several
// processes can take its place.
type RateLimiter interface {
	// Pace waits for the next request's turn, up to maxWait; a turn
	// further away is a *arbiter.ThrottledError, ctx's end ctx's error.
	Pace(ctx context.Context, maxWait time.Duration) error
	// Sent counts a request going out and returns its time.
	Sent() time.Time
	// Throttled records that the provider turned away the request sent
	// at sent, asking to wait retryAfter (0 when it did not say), and
	// returns how long its task waits.
	Throttled(sent time.Time, retryAfter time.Duration) time.Duration
	// Succeeded records a request the provider answered.
	Succeeded()
}

// modelClient is one provider's API: it asks for up to n answers on a
// task in one request.
type modelClient interface {
	// ask makes one request for n answers (n ≤ perRequest) at
	// temperature, with the tokens' log-probabilities when logprobs is
	// set, and returns the answers it got (a provider may return fewer
	// than n) and the tokens the request took. Its errors are as
	// arbiter.Verifier's.
	ask(ctx context.Context, t *arbiter.Task, n int, temperature float64, logprobs bool) ([]Answer, arbiter.Usage, error)
	// perRequest is the most answers one request can ask for.
	perRequest() int
}

// modelVerifier is a verifier backed by a model: it asks its client for
// the answers its confidence source plans, in as few requests as the
// provider allows, each paced by the limiter, and combines them.
type modelVerifier struct {
	model   string
	client  modelClient
	source  ConfidenceSource
	limiter RateLimiter
}

// Pace waits for the next call's turn with the provider, up to maxWait
// (RateLimiter.Pace). The worker calls it before each call's time limit
// starts.
func (m *modelVerifier) Pace(ctx context.Context, maxWait time.Duration) error {
	return m.limiter.Pace(ctx, maxWait)
}

// Verify asks for the planned answers within ctx's deadline and combines
// them. The first request's turn was taken by the worker (Pace); each
// further one waits for its own, within the deadline. A failed request
// fails the call; the Verification names the model and the tokens used
// whether the call answered or failed.
func (m *modelVerifier) Verify(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
	v := arbiter.Verification{Model: m.model}
	want, temperature, logprobs := m.source.Plan()
	var answers []Answer
	for requests := 0; len(answers) < want; requests++ {
		if requests > 0 {
			wait := time.Duration(0)
			if deadline, ok := ctx.Deadline(); ok {
				wait = max(time.Until(deadline), 0)
			}
			if err := m.limiter.Pace(ctx, wait); err != nil {
				return v, err
			}
		}
		if requests >= want {
			// Every request returned nothing: a provider that answers no
			// choices is unreadable, not to be asked forever.
			return v, failed(arbiter.VerifierUnreadable, fmt.Errorf("%d requests returned %d of %d answers", requests, len(answers), want))
		}
		got, usage, err := m.client.ask(ctx, t, min(want-len(answers), m.client.perRequest()), temperature, logprobs)
		v.Usage = v.Usage.Add(usage)
		if err != nil {
			return v, err
		}
		answers = append(answers, got...)
	}
	v.Decided = true
	v.Verdict, v.Confidence, v.Rationale = m.source.Combine(answers[:want])
	return v, nil
}

var _ RateLimiter = (*Limiter)(nil)
