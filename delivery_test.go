package arbiter_test

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestNextDelivery walks the rule with a short schedule of two waits, as
// each channel's rule uses it.
func TestNextDelivery(t *testing.T) {
	counted := arbiter.RetryRule{Delays: []time.Duration{time.Second, time.Minute}, Jitter: 0.1, ThrottleCounts: true}
	pacing := arbiter.RetryRule{Delays: []time.Duration{time.Second, time.Minute}}
	for _, tc := range []struct {
		name     string
		rule     arbiter.RetryRule
		attempts int
		o        arbiter.DeliveryOutcome
		jitter   float64
		want     arbiter.DeliveryStep
	}{
		{"sent counts the attempt", counted, 0, arbiter.DeliveryOutcome{Sent: true}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryDone, Attempts: 1}},
		{"sent after failures", counted, 2, arbiter.DeliveryOutcome{Sent: true}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryDone, Attempts: 3}},
		{"skipped counts nothing", counted, 1, arbiter.DeliveryOutcome{Skipped: true}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliverySkipped, Attempts: 1}},
		{"a deferral waits as asked, uncounted", counted, 1, arbiter.DeliveryOutcome{Defer: 3 * time.Second}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 1, Delay: 3 * time.Second}},
		{"a deferral even past the schedule", counted, 2, arbiter.DeliveryOutcome{Defer: time.Second}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: time.Second}},
		{"first failure waits the first delay", counted, 0, arbiter.DeliveryOutcome{}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 1, Delay: time.Second}},
		{"second failure waits the second", counted, 1, arbiter.DeliveryOutcome{}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: time.Minute}},
		{"the failure after the last delay fails", counted, 2, arbiter.DeliveryOutcome{}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryFailed, Attempts: 3}},
		{"a permanent failure fails at once", counted, 0, arbiter.DeliveryOutcome{Permanent: true}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryFailed, Attempts: 1}},
		{"jitter varies the delay", counted, 1, arbiter.DeliveryOutcome{}, 0.05,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: 63 * time.Second}},
		{"jitter is clamped to the rule's", counted, 1, arbiter.DeliveryOutcome{}, -0.5,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: 54 * time.Second}},
		{"no jitter without the rule's", pacing, 1, arbiter.DeliveryOutcome{}, 0.1,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: time.Minute}},
		{"a counted throttle waits its Retry-After when longer", counted, 0, arbiter.DeliveryOutcome{RetryAfter: 10 * time.Second}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 1, Delay: 10 * time.Second}},
		{"a counted throttle waits the schedule when longer", counted, 1, arbiter.DeliveryOutcome{RetryAfter: 10 * time.Second}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: time.Minute}},
		{"a counted throttle waits a day at most", counted, 0, arbiter.DeliveryOutcome{RetryAfter: 72 * time.Hour}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 1, Delay: 24 * time.Hour}},
		{"a counted throttle after the schedule fails", counted, 2, arbiter.DeliveryOutcome{RetryAfter: time.Second}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryFailed, Attempts: 3}},
		{"an uncounted throttle waits as asked", pacing, 2, arbiter.DeliveryOutcome{RetryAfter: 30 * time.Second}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 2, Delay: 30 * time.Second}},
		{"an uncounted throttle waits a day at most", pacing, 0, arbiter.DeliveryOutcome{RetryAfter: 48 * time.Hour}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryRetry, Attempts: 0, Delay: 24 * time.Hour}},
		{"no schedule fails the first failure", arbiter.RetryRule{}, 0, arbiter.DeliveryOutcome{}, 0,
			arbiter.DeliveryStep{State: arbiter.DeliveryFailed, Attempts: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := arbiter.NextDelivery(tc.rule, tc.attempts, tc.o, tc.jitter); got != tc.want {
				t.Errorf("NextDelivery = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRetryRules_KeepEachChannelsSchedule: the webhook rule is its
// schedule with jitter, counting throttles; Slack's doubles from a second
// and fails the MaxSlackAttempts-th failure.
func TestRetryRules_KeepEachChannelsSchedule(t *testing.T) {
	if r := arbiter.WebhookRetry; len(r.Delays) != len(arbiter.WebhookRetryDelays) || r.Jitter != arbiter.WebhookJitter || !r.ThrottleCounts {
		t.Errorf("WebhookRetry = %+v", r)
	}
	if r := arbiter.SlackRetry; len(r.Delays) != arbiter.MaxSlackAttempts-1 || r.Delays[0] != time.Second ||
		r.Delays[len(r.Delays)-1] != 64*time.Second || r.ThrottleCounts || r.Jitter != 0 {
		t.Errorf("SlackRetry = %+v", r)
	}
}
