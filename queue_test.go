package arbiter_test

import (
	"errors"
	"math"
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
	cases := []struct {
		name     string
		task     *arbiter.Task
		v        arbiter.Verification
		err      error
		next     string
		runAfter time.Duration // after now, for retries
		failed   bool
	}{
		{"Confident", task(0), yes("approve", 0.95), nil, arbiter.StatusCompleted, 0, false},
		{"AtThreshold", task(0), yes("reject", 0.8), nil, arbiter.StatusCompleted, 0, false},
		{"BelowThreshold", task(0), yes("approve", 0.79), nil, arbiter.StatusHumanNeeded, 0, false},
		{"Declined", task(0), arbiter.Verification{Model: "none"}, nil, arbiter.StatusHumanNeeded, 0, false},
		{"FirstError", task(0), arbiter.Verification{}, errors.New("timeout"), arbiter.StatusPending, time.Second, true},
		{"SecondError", task(1), arbiter.Verification{}, errors.New("timeout"), arbiter.StatusPending, 2 * time.Second, true},
		{"ThirdErrorGoesToHuman", task(2), arbiter.Verification{}, errors.New("timeout"), arbiter.StatusHumanNeeded, 0, true},
		{"VerdictOutsideSet", task(0), yes("maybe", 0.99), nil, arbiter.StatusPending, time.Second, true},
		{"ConfidenceAboveOne", task(0), yes("approve", 1.5), nil, arbiter.StatusPending, time.Second, true},
		{"ConfidenceNaN", task(0), yes("approve", math.NaN()), nil, arbiter.StatusPending, time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := arbiter.NextAgentStep(tc.task, tc.v, tc.err, started, now, backoff)
			if step.Next != tc.next {
				t.Fatalf("next = %s, want %s", step.Next, tc.next)
			}
			a := step.Attempt
			if a.Tier != "agent" || a.StartedAt != arbiter.TimestampOf(started) || *a.FinishedAt != arbiter.TimestampOf(now) {
				t.Errorf("attempt = %+v", a)
			}
			if (a.Error != nil) != tc.failed {
				t.Errorf("attempt error = %v, want failed %v", a.Error, tc.failed)
			}
			if tc.failed && (a.Verdict != nil || a.Confidence != nil) {
				t.Errorf("a failed attempt carries a verdict: %+v", a)
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
