package arbiter_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestTask_HideOpenVotes(t *testing.T) {
	agent := agentAttempt("approve", 0.4)
	vote := func(person, verdict string) arbiter.Attempt {
		return arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: ref(verdict), PersonID: person, Reviewer: ref(person + "@example.com")}
	}
	audit := arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: ref("approve"), Audit: true, Reviewer: ref("r@example.com")}
	two := &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous}
	one := &arbiter.ReviewRequirement{ReviewsRequired: 1, Consensus: arbiter.ConsensusAny}
	for _, tc := range []struct {
		name     string
		status   string
		review   *arbiter.ReviewRequirement
		attempts []arbiter.Attempt
		want     []arbiter.Attempt
		cast     *int // nil: no votes_cast
	}{
		{"a single review shows everything", arbiter.StatusCompleted, nil, []arbiter.Attempt{agent, audit}, []arbiter.Attempt{agent, audit}, nil},
		{"a requirement of one vote is a single review", arbiter.StatusHumanNeeded, one, []arbiter.Attempt{agent}, []arbiter.Attempt{agent}, nil},
		{"open, nobody voted", arbiter.StatusHumanNeeded, two, []arbiter.Attempt{agent}, []arbiter.Attempt{agent}, ref(0)},
		{"open, one vote hidden, the agent's answer kept", arbiter.StatusHumanNeeded, two,
			[]arbiter.Attempt{agent, vote("per_ann", "reject")}, []arbiter.Attempt{agent}, ref(1)},
		{"open in a tiebreak, both votes hidden", arbiter.StatusHumanNeeded, two,
			[]arbiter.Attempt{vote("per_ann", "reject"), agent, vote("per_bob", "approve")}, []arbiter.Attempt{agent}, ref(2)},
		{"decided, the votes shown", arbiter.StatusCompleted, two,
			[]arbiter.Attempt{agent, vote("per_ann", "approve"), vote("per_bob", "approve")},
			[]arbiter.Attempt{agent, vote("per_ann", "approve"), vote("per_bob", "approve")}, ref(2)},
		{"expired, its vote shown", arbiter.StatusExpired, two,
			[]arbiter.Attempt{vote("per_ann", "reject")}, []arbiter.Attempt{vote("per_ann", "reject")}, ref(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &arbiter.Task{Status: tc.status, Review: tc.review, Attempts: slices.Clone(tc.attempts)}
			task.HideOpenVotes()
			if !reflect.DeepEqual(task.Attempts, tc.want) {
				t.Errorf("attempts = %+v, want %+v", task.Attempts, tc.want)
			}
			if (task.VotesCast == nil) != (tc.cast == nil) || (tc.cast != nil && *task.VotesCast != *tc.cast) {
				t.Errorf("votes_cast = %v, want %v", task.VotesCast, tc.cast)
			}
		})
	}
}
