package arbiter_test

import (
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestPercentile(t *testing.T) {
	for _, c := range []struct {
		values []float64
		p      float64
		want   float64
	}{
		{[]float64{5}, 0.5, 5},
		{[]float64{1, 2, 3, 4}, 0.5, 2.5},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9.1},
		{[]float64{1, 2, 3}, 0, 1},
		{[]float64{1, 2, 3}, 1, 3},
	} {
		if got := arbiter.Percentile(c.values, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.values, c.p, got, c.want)
		}
	}
	if !math.IsNaN(arbiter.Percentile(nil, 0.5)) {
		t.Error("the percentile of nothing is a number")
	}
}

func TestSummarizeDesk(t *testing.T) {
	const minute = 60_000
	approve, reject := "approve", "reject"
	decisions := []arbiter.DecisionRecord{
		{Reviewer: "ann@example.com", Verdict: "approve", Agent: &approve, Waiting: 0, Decided: 1 * minute},
		{Reviewer: "ann@example.com", Verdict: "approve", Agent: &reject, Waiting: 0, Decided: 3 * minute},
		{Reviewer: "bob@example.com", Verdict: "reject", Agent: nil, Waiting: 0, Decided: 10 * minute},
	}
	waiting := []arbiter.WaitingTask{{Since: 0}, {Since: 50 * minute}, {Since: 90 * minute}}
	s := arbiter.SummarizeDesk("7d", decisions, waiting, 100*minute)
	if s.Team.Decisions != 3 || s.Team.Median != 3*time.Minute || s.Team.Compared != 2 || s.Team.Disagreements != 1 {
		t.Errorf("team = %+v", s.Team)
	}
	if len(s.Reviewers) != 2 || s.Reviewers[0].Reviewer != "ann@example.com" || s.Reviewers[0].Median != 2*time.Minute ||
		s.Reviewers[0].DisagreementRate() != 0.5 || s.Reviewers[1].DisagreementRate() != -1 {
		t.Errorf("reviewers = %+v", s.Reviewers)
	}
	// Ages 100, 50 and 10 minutes.
	if s.Waiting != 3 || s.AgeP50 != 50*time.Minute || s.AgeOldest != 100*time.Minute || s.AgeP90 != 90*time.Minute {
		t.Errorf("queue = %d, p50 %v, p90 %v, oldest %v", s.Waiting, s.AgeP50, s.AgeP90, s.AgeOldest)
	}
	if empty := arbiter.SummarizeDesk("24h", nil, nil, 0); empty.Team.Decisions != 0 || empty.AgeOldest != 0 || len(empty.Reviewers) != 0 {
		t.Errorf("empty = %+v", empty)
	}
}

func TestParseStatsWindow(t *testing.T) {
	if name, d, err := arbiter.ParseStatsWindow(""); err != nil || name != "7d" || d != 7*24*time.Hour {
		t.Errorf("default = %q %v %v", name, d, err)
	}
	for _, bad := range []string{"1y", "7D", "-1d", "0"} {
		if _, _, err := arbiter.ParseStatsWindow(bad); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("%q = %v", bad, err)
		}
	}
}
