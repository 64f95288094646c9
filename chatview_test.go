package arbiter_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestOutcomeOf(t *testing.T) {
	approve, reject, ann := "approve", "reject", "ann@example.com"
	at := arbiter.Timestamp(1_800_000_000_000)
	human, agent := arbiter.TierHuman, arbiter.TierAgent
	for _, tc := range []struct {
		name string
		task arbiter.Task
		want arbiter.TaskOutcome
	}{
		{"Waiting", arbiter.Task{Status: arbiter.StatusHumanNeeded}, arbiter.TaskOutcome{State: arbiter.OutcomeWaiting}},
		{"Expired", arbiter.Task{Status: arbiter.StatusExpired, ExpiredAt: &at}, arbiter.TaskOutcome{State: arbiter.OutcomeExpired, At: at}},
		{"DecidedByAPerson", arbiter.Task{Status: arbiter.StatusCompleted, FinalVerdict: &reject, FinalTier: &human, CompletedAt: &at,
			Attempts: []arbiter.Attempt{{Tier: arbiter.TierHuman, Verdict: &reject, Reviewer: &ann}}},
			arbiter.TaskOutcome{State: arbiter.OutcomeCompleted, Verdict: "reject", By: ann, At: at}},
		{"DecidedByTheVerifier", arbiter.Task{Status: arbiter.StatusCompleted, FinalVerdict: &approve, FinalTier: &agent, CompletedAt: &at},
			arbiter.TaskOutcome{State: arbiter.OutcomeCompleted, Verdict: "approve", At: at}},
		{"AuditAnswered", arbiter.Task{Status: arbiter.StatusCompleted, FinalVerdict: &approve, FinalTier: &agent, AuditState: arbiter.AuditStateDone,
			Attempts: []arbiter.Attempt{{Tier: arbiter.TierHuman, Verdict: &reject, Reviewer: &ann, Audit: true, StartedAt: at}}},
			arbiter.TaskOutcome{State: arbiter.OutcomeAudited, By: ann, At: at}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := arbiter.OutcomeOf(&tc.task); got != tc.want {
				t.Errorf("OutcomeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestContextFields(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		n         int
		want      string
	}{
		{"InOrder", `{"b":"two","a":1.50,"c":{"x": [1, 2]}}`, 10, `b=two a=1.50 c={"x":[1,2]}`},
		{"Bounded", `{"a":1,"b":2,"c":3}`, 2, `a=1 b=2`},
		{"NotAnObject", `[1,2]`, 5, ``},
		{"Broken", `{"a":1,"b":`, 5, `a=1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, values := arbiter.ContextFields([]byte(tc.raw), tc.n)
			var got []string
			for i := range keys {
				got = append(got, keys[i]+"="+values[i])
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("ContextFields = %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}
