package arbiter_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestNextAgentStep(t *testing.T) {
	started := time.UnixMilli(1763805600000)
	now := started.Add(1500 * time.Millisecond)
	backoff := func(failures int) time.Duration { return time.Second << failures }
	task := func(failures int) *arbiter.Task {
		return &arbiter.Task{AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8, Failures: failures}
	}
	yes := func(verdict string, c float64) arbiter.Verification {
		return arbiter.Verification{Decided: true, Verdict: verdict, Confidence: c, Rationale: "r", Model: "m"}
	}
	unreachable := &arbiter.VerifierError{Reason: arbiter.VerifierUnreachable, Err: errors.New(`Post "http://10.0.0.7/v1": refused`)}
	cases := []struct {
		name     string
		task     *arbiter.Task
		v        arbiter.Verification
		err      error
		next     string
		runAfter time.Duration // after now, for retries
		reason   string        // the failed attempt's error; "" when it did not fail
	}{
		{"Confident", task(0), yes("approve", 0.95), nil, arbiter.StatusCompleted, 0, ""},
		{"AtThreshold", task(0), yes("reject", 0.8), nil, arbiter.StatusCompleted, 0, ""},
		{"BelowThreshold", task(0), yes("approve", 0.79), nil, arbiter.StatusHumanNeeded, 0, ""},
		{"Declined", task(0), arbiter.Verification{Model: "none"}, nil, arbiter.StatusHumanNeeded, 0, ""},
		{"FirstError", task(0), arbiter.Verification{}, unreachable, arbiter.StatusPending, time.Second, arbiter.VerifierUnreachable},
		{"SecondError", task(1), arbiter.Verification{}, unreachable, arbiter.StatusPending, 2 * time.Second, arbiter.VerifierUnreachable},
		{"ThirdErrorGoesToHuman", task(2), arbiter.Verification{}, unreachable, arbiter.StatusHumanNeeded, 0, arbiter.VerifierUnreachable},
		{"DeadlinePassed", task(0), arbiter.Verification{}, fmt.Errorf("call: %w", context.DeadlineExceeded), arbiter.StatusPending, time.Second, arbiter.VerifierTimedOut},
		{"ErrOfUnknownWordsIsNotShown", task(0), arbiter.Verification{}, errors.New("dial tcp 10.0.0.7:443: refused"), arbiter.StatusPending, time.Second, arbiter.VerifierFailed},
		{"VerdictOutsideSet", task(0), yes("maybe", 0.99), nil, arbiter.StatusPending, time.Second, arbiter.VerifierVerdictOutsideSet},
		{"ConfidenceAboveOne", task(0), yes("approve", 1.5), nil, arbiter.StatusPending, time.Second, arbiter.VerifierConfidenceOutOfRange},
		{"ConfidenceNaN", task(0), yes("approve", math.NaN()), nil, arbiter.StatusPending, time.Second, arbiter.VerifierConfidenceOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := arbiter.NextAgentStep(tc.task, tc.v, tc.err, started, now, arbiter.AgentRetry{Backoff: backoff, CallTimeout: time.Minute})
			if step.Throttled {
				t.Errorf("step = %+v, throttled", step)
			}
			if step.Next != tc.next {
				t.Fatalf("next = %s, want %s", step.Next, tc.next)
			}
			a := step.Attempt
			if a.Tier != "agent" || a.StartedAt != arbiter.TimestampOf(started) || *a.FinishedAt != arbiter.TimestampOf(now) {
				t.Errorf("attempt = %+v", a)
			}
			failed := tc.reason != ""
			if (a.Error != nil) != failed || (failed && *a.Error != tc.reason) {
				t.Errorf("attempt error = %v, want %q", a.Error, tc.reason)
			}
			if failed && (a.Verdict != nil || a.Confidence != nil) {
				t.Errorf("a failed attempt carries a verdict: %+v", a)
			}
			if failed && (step.Err == nil || (tc.err != nil && !errors.Is(step.Err, tc.err))) {
				t.Errorf("step error = %v, want the full cause for the log", step.Err)
			}
			if tc.next == arbiter.StatusPending && step.RunAfter != arbiter.TimestampOf(now.Add(tc.runAfter)) {
				t.Errorf("run after %v, want now+%v", step.RunAfter.Time(), tc.runAfter)
			}
			if tc.next == arbiter.StatusCompleted && (*a.Verdict != tc.v.Verdict || *a.Confidence != tc.v.Confidence || *a.Model != "m") {
				t.Errorf("decided attempt = %+v", a)
			}
		})
	}
}

// TestNextAgentStep_Throttled: a throttled call is not a failure. The task
// goes back to pending for at least what the provider asked, whatever its
// failures so far, recording no attempt; when its next call could not end
// before its deadline, it goes to a human with an attempt saying why.
func TestNextAgentStep_Throttled(t *testing.T) {
	started := time.UnixMilli(1763805600000)
	now := started.Add(1500 * time.Millisecond)
	retry := arbiter.AgentRetry{Backoff: func(int) time.Duration { return time.Second }, CallTimeout: 30 * time.Second}
	task := func(failures int, deadlineIn time.Duration) *arbiter.Task {
		t := &arbiter.Task{AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8, Failures: failures}
		if deadlineIn > 0 {
			at := arbiter.TimestampOf(now.Add(deadlineIn))
			t.DeadlineAt = &at
		}
		return t
	}
	throttled := func(d time.Duration) error {
		return &arbiter.ThrottledError{RetryAfter: d, Err: errors.New(`http://10.0.0.7/v1 answered 429 Too Many Requests`)}
	}
	called := arbiter.Verification{Model: "m"}
	cases := []struct {
		name     string
		task     *arbiter.Task
		err      error
		human    bool
		runAfter time.Duration // after now, when it waits
	}{
		{"WaitsItsRetryAfter", task(0, 0), throttled(5 * time.Second), false, 5 * time.Second},
		{"CountsNoFailure", task(arbiter.MaxAgentFailures-1, 0), throttled(5 * time.Second), false, 5 * time.Second},
		{"WrappedIsThrottledToo", task(0, 0), fmt.Errorf("call: %w", throttled(time.Second)), false, time.Second},
		{"RoundsUpToTheMillisecond", task(0, 0), throttled(1200 * time.Microsecond), false, 2 * time.Millisecond},
		{"NegativeWaitIsNone", task(0, 0), throttled(-time.Second), false, 0},
		{"FarFromItsDeadlineWaits", task(0, time.Hour), throttled(5 * time.Second), false, 5 * time.Second},
		{"JustBeforeItsDeadlineWaits", task(0, 35*time.Second+time.Millisecond), throttled(5 * time.Second), false, 5 * time.Second},
		{"NextCallWouldEndAtItsDeadline", task(0, 35*time.Second), throttled(5 * time.Second), true, 0},
		{"NearItsDeadlineGoesToHuman", task(0, 20*time.Second), throttled(time.Second), true, 0},
		{"WaitPastItsDeadlineGoesToHuman", task(0, time.Hour), throttled(2 * time.Hour), true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := arbiter.NextAgentStep(tc.task, called, tc.err, started, now, retry)
			if step.Err == nil || !errors.Is(step.Err, tc.err) {
				t.Errorf("step error = %v, want the full cause for the log", step.Err)
			}
			if tc.human {
				a := step.Attempt
				if step.Next != arbiter.StatusHumanNeeded || step.Throttled || a.Error == nil || *a.Error != arbiter.VerifierThrottled ||
					a.Model == nil || *a.Model != "m" || a.Verdict != nil || a.Tier != arbiter.TierAgent {
					t.Errorf("step = %+v, attempt %+v; want human_needed with a failed attempt saying %q", step, a, arbiter.VerifierThrottled)
				}
				return
			}
			if step.Next != arbiter.StatusPending || !step.Throttled || step.Attempt != (arbiter.Attempt{}) {
				t.Fatalf("step = %+v; want pending, throttled, with no attempt", step)
			}
			if want := arbiter.TimestampOf(now.Add(tc.runAfter)); step.RunAfter != want {
				t.Errorf("run after %v, want now+%v", step.RunAfter.Time(), tc.runAfter)
			}
		})
	}
}

func TestValidateRationale(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"Empty", "", true},
		{"Plain", "Nine days late is past the promise.", true},
		{"AtTheCharacterLimit", strings.Repeat("a", arbiter.MaxRationaleChars), true},
		{"OverTheCharacterLimit", strings.Repeat("a", arbiter.MaxRationaleChars+1), false},
		{"AtTheByteLimit", strings.Repeat("語", arbiter.MaxRationaleBytes/3), true},
		{"OverTheByteLimitUnderTheCharacterLimit", strings.Repeat("語", arbiter.MaxRationaleBytes/3+1), false},
		{"NUL", "a\x00b", false},
		{"InvalidUTF8", "caf\xe9", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := arbiter.ValidateRationale(tc.s)
			if (err == nil) != tc.ok || (err != nil && arbiter.ErrorCode(err) != arbiter.EINVALID) {
				t.Fatalf("ValidateRationale = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestLostAgentStep(t *testing.T) {
	now := time.UnixMilli(1763805600000)
	for failures := range arbiter.MaxAgentFailures + 2 {
		task := &arbiter.Task{AllowedVerdicts: []string{"approve"}, ConfidenceThreshold: 0.8, Failures: failures}
		step, lost := arbiter.LostAgentStep(task, now)
		if want := failures >= arbiter.MaxAgentFailures; lost != want {
			t.Fatalf("%d failures: lost = %v, want %v", failures, lost, want)
		}
		if !lost {
			continue
		}
		a := step.Attempt
		if step.Next != arbiter.StatusHumanNeeded || a.Tier != arbiter.TierAgent || a.Error == nil || *a.Error != arbiter.VerifierLost ||
			a.Verdict != nil || a.StartedAt != arbiter.TimestampOf(now) || a.FinishedAt == nil || *a.FinishedAt != arbiter.TimestampOf(now) ||
			step.Err == nil {
			t.Errorf("%d failures: step = %+v, attempt %+v", failures, step, a)
		}
	}
}

func TestHumanDecision_Attempt(t *testing.T) {
	now := arbiter.Timestamp(1763805600000)
	waiting := func() *arbiter.Task {
		return &arbiter.Task{Status: arbiter.StatusHumanNeeded, AllowedVerdicts: []string{"approve", "reject"}}
	}
	decidedBy := func(reviewer string) *arbiter.Task {
		t := waiting()
		t.Status = arbiter.StatusCompleted
		t.Attempts = []arbiter.Attempt{{Tier: arbiter.TierHuman, Reviewer: &reviewer}}
		return t
	}
	good := arbiter.HumanDecision{Verdict: "reject", Rationale: "Receipt missing.", Reviewer: "alice@example.com"}
	with := func(change func(*arbiter.HumanDecision)) arbiter.HumanDecision {
		d := good
		change(&d)
		return d
	}

	t.Run("ReviewerVerdictAtFullConfidence", func(t *testing.T) {
		a, err := good.Attempt(waiting(), now)
		if err != nil {
			t.Fatal(err)
		}
		if a.Tier != arbiter.TierHuman || *a.Verdict != "reject" || *a.Confidence != 1.0 || *a.Reviewer != "alice@example.com" ||
			a.Rationale != "Receipt missing." || a.Model != nil || a.Error != nil || a.StartedAt != now || *a.FinishedAt != now {
			t.Errorf("attempt = %+v", a)
		}
	})
	for _, tc := range []struct {
		name string
		task *arbiter.Task
		d    arbiter.HumanDecision
		code string
		msg  string // in the error's message, when set
	}{
		{"ErrNoReviewer", waiting(), with(func(d *arbiter.HumanDecision) { d.Reviewer = " " }), arbiter.EINVALID, "reviewer"},
		{"ErrNoVerdict", waiting(), with(func(d *arbiter.HumanDecision) { d.Verdict = "" }), arbiter.EINVALID, ""},
		{"ErrVerdictOutsideSet", waiting(), with(func(d *arbiter.HumanDecision) { d.Verdict = "maybe" }), arbiter.EINVALID, `"maybe"`},
		{"ErrRationaleTooLong", waiting(), with(func(d *arbiter.HumanDecision) { d.Rationale = strings.Repeat("é", arbiter.MaxRationaleChars+1) }), arbiter.EINVALID, ""},
		{"ErrRationaleWithNUL", waiting(), with(func(d *arbiter.HumanDecision) { d.Rationale = "a\x00b" }), arbiter.EINVALID, ""},
		{"ErrRationaleNotUTF8", waiting(), with(func(d *arbiter.HumanDecision) { d.Rationale = "a\xffb" }), arbiter.EINVALID, ""},
		{"ErrDecidedAlready", decidedBy("bob@example.com"), good, arbiter.ECONFLICT, "already decided by bob@example.com"},
		{"ErrStillWithTheAgent", &arbiter.Task{Status: arbiter.StatusAgentRunning, AllowedVerdicts: []string{"reject"}}, good, arbiter.ECONFLICT, "agent_running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.d.Attempt(tc.task, now)
			if arbiter.ErrorCode(err) != tc.code || !strings.Contains(arbiter.ErrorMessage(err), tc.msg) {
				t.Errorf("Attempt = %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestQueueView_Query(t *testing.T) {
	for _, c := range []struct {
		view arbiter.QueueView
		want string
	}{
		{arbiter.QueueView{}, ""},
		{arbiter.QueueView{Order: arbiter.QueueOldestFirst}, ""},
		{arbiter.QueueView{Order: arbiter.QueueByDeadline}, "?order=deadline"},
		{arbiter.QueueView{TaskType: "refund", Source: "a b&c", Touchpoint: "chat"}, "?source=a+b%26c&task_type=refund&touchpoint=chat"},
	} {
		got := c.view.Query()
		if got != c.want {
			t.Errorf("%+v.Query() = %q, want %q", c.view, got, c.want)
		}
		// Read back from the address, it is the same view.
		q, err := url.ParseQuery(strings.TrimPrefix(got, "?"))
		if err != nil {
			t.Fatal(err)
		}
		back, want := arbiter.QueueViewOf(q), c.view
		if err := back.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := want.Validate(); err != nil {
			t.Fatal(err)
		}
		if back != want {
			t.Errorf("%q reads back as %+v, want %+v", got, back, want)
		}
	}
}
