package arbiter

import "time"

// Deliveries: every outbox's messages (webhooks, Slack, mail) are sent
// under a lease and moved on after each attempt by one rule, NextDelivery,
// whose parameters are each channel's: its schedule of waits, their
// jitter, and whether a receiver that asked to be left alone for a while
// (429, Retry-After) used up an attempt.

// RetryRule is how an outbox retries a message whose attempt failed.
type RetryRule struct {
	// Delays are the waits after the first, second … failed attempt
	// before the next; the failure after the last fails the message.
	Delays []time.Duration
	// Jitter is the largest fraction by which a delay is varied either
	// way, so that failures do not retry in lockstep (0: none).
	Jitter float64
	// ThrottleCounts says whether an attempt the receiver throttled
	// counts as a failed attempt, waiting at least its delay (webhooks),
	// or only waits what it was asked (Slack, whose 429s pace a channel).
	ThrottleCounts bool
}

// DeliveryOutcome is what one attempt at a message came to.
type DeliveryOutcome struct {
	// Sent: the receiver took the message.
	Sent bool
	// Skipped: there was nothing to send.
	Skipped bool
	// Permanent: the attempt failed in a way no retry mends.
	Permanent bool
	// RetryAfter, when positive, is how long the receiver asked to wait.
	RetryAfter time.Duration
	// Defer, when positive, moves the message later without an attempt
	// (a channel's pace, an update waiting for its post).
	Defer time.Duration
}

// Where an attempt leaves its message (DeliveryStep.State).
const (
	DeliveryDone    = "done"    // sent
	DeliverySkipped = "skipped" // nothing to send
	DeliveryRetry   = "retry"   // pending, tried again after Delay
	DeliveryFailed  = "failed"  // given up
)

// DeliveryStep is where an attempt leaves its message.
type DeliveryStep struct {
	State string
	// Attempts is the message's attempts counted so far, this one
	// included when it counts.
	Attempts int
	// Delay is the wait before the next attempt, for DeliveryRetry.
	Delay time.Duration
}

// maxRetryAfter bounds how far a Retry-After may push an attempt.
const maxRetryAfter = 24 * time.Hour

// NextDelivery moves a message on after an attempt that came to o, its
// attempts counted before it: sent or skipped ends it; a deferral waits as
// asked and counts nothing, as does a throttle the rule does not count
// (at most a day); a permanent failure fails it; any other failure counts
// and waits rule.Delays[n-1] for the n-th, varied by jitter (a fraction
// clamped to ±rule.Jitter), or longer when a counted throttle asked for
// more (at most a day), until the delays run out and it fails.
func NextDelivery(rule RetryRule, attempts int, o DeliveryOutcome, jitter float64) DeliveryStep {
	switch {
	case o.Sent:
		return DeliveryStep{State: DeliveryDone, Attempts: attempts + 1}
	case o.Skipped:
		return DeliveryStep{State: DeliverySkipped, Attempts: attempts}
	case o.Defer > 0:
		return DeliveryStep{State: DeliveryRetry, Attempts: attempts, Delay: o.Defer}
	case o.RetryAfter > 0 && !rule.ThrottleCounts:
		return DeliveryStep{State: DeliveryRetry, Attempts: attempts, Delay: min(o.RetryAfter, maxRetryAfter)}
	}
	n := attempts + 1
	if o.Permanent || n < 1 || n > len(rule.Delays) {
		return DeliveryStep{State: DeliveryFailed, Attempts: n}
	}
	jitter = max(-rule.Jitter, min(rule.Jitter, jitter))
	delay := time.Duration(float64(rule.Delays[n-1]) * (1 + jitter))
	if o.RetryAfter > delay {
		delay = min(o.RetryAfter, maxRetryAfter)
	}
	return DeliveryStep{State: DeliveryRetry, Attempts: n, Delay: delay}
}
