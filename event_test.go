package arbiter_test

import (
	"slices"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestTaskEventOf(t *testing.T) {
	for _, tc := range []struct {
		status, event string
	}{
		{arbiter.StatusPending, ""},
		{arbiter.StatusAgentRunning, ""},
		{arbiter.StatusHumanNeeded, arbiter.EventTaskHumanNeeded},
		{arbiter.StatusCompleted, arbiter.EventTaskCompleted},
		{arbiter.StatusExpired, arbiter.EventTaskExpired},
		{"", ""},
		{"archived", ""},
	} {
		if got := arbiter.TaskEventOf(tc.status); got != tc.event {
			t.Errorf("TaskEventOf(%q) = %q, want %q", tc.status, got, tc.event)
		}
	}
}

// TestFinalEvent: only the events that end a task answer its waiters.
func TestFinalEvent(t *testing.T) {
	for _, tc := range []struct {
		event string
		final bool
	}{
		{arbiter.EventTaskCompleted, true},
		{arbiter.EventTaskExpired, true},
		{arbiter.EventTaskHumanNeeded, false},
		{arbiter.EventTaskAuditDisagreed, false},
		{arbiter.EventTaskVoteRecorded, false},
		{arbiter.EventTaskEscalated, false},
		{arbiter.EventCalibrationDrifted, false},
		{arbiter.EventPing, false},
		{arbiter.EventTaskReminded, false},
		{arbiter.EventTaskAuditAnswered, false},
	} {
		if got := arbiter.FinalEvent(tc.event); got != tc.final {
			t.Errorf("FinalEvent(%q) = %v, want %v", tc.event, got, tc.final)
		}
	}
}

// TestFinalEvent_AgreesWithFinalStatus: a status change's event ends its
// task exactly when the status is final.
func TestFinalEvent_AgreesWithFinalStatus(t *testing.T) {
	for _, status := range []string{arbiter.StatusPending, arbiter.StatusAgentRunning, arbiter.StatusHumanNeeded,
		arbiter.StatusCompleted, arbiter.StatusExpired} {
		if ev := arbiter.TaskEventOf(status); ev != "" && arbiter.FinalEvent(ev) != arbiter.FinalStatus(status) {
			t.Errorf("status %q: FinalEvent(%q) = %v, FinalStatus = %v", status, ev, arbiter.FinalEvent(ev), arbiter.FinalStatus(status))
		}
	}
}

// TestInternalEventTypes_ReachNoEndpoint: an internal event is neither
// subscribable nor sent to a callback.
func TestInternalEventTypes_ReachNoEndpoint(t *testing.T) {
	for _, ev := range arbiter.InternalEventTypes {
		if slices.Contains(arbiter.WebhookEventTypes, ev) || slices.Contains(arbiter.CallbackEventTypes, ev) {
			t.Errorf("%q is internal and announced", ev)
		}
		if arbiter.Announced(ev) {
			t.Errorf("Announced(%q) = true", ev)
		}
	}
	for _, ev := range arbiter.WebhookEventTypes {
		if !arbiter.Announced(ev) {
			t.Errorf("Announced(%q) = false", ev)
		}
	}
}
