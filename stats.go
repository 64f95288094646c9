package arbiter

import (
	"context"
	"math"
	"slices"
	"time"
)

// StatsWindows are the windows the desk's stats offer, by their name in the
// address; DefaultStatsWindow is shown when none is asked for.
var StatsWindows = []struct {
	Name   string
	Length time.Duration
}{
	{"24h", 24 * time.Hour},
	{"7d", 7 * 24 * time.Hour},
	{"30d", 30 * 24 * time.Hour},
}

// DefaultStatsWindow names the window the stats page starts with.
const DefaultStatsWindow = "7d"

// MaxStatsRows bounds the decisions and the waiting tasks one stats page
// reads; a window holding more is summarized from its latest MaxStatsRows.
const MaxStatsRows = 20000

// ParseStatsWindow returns the length of the named window ("" for the
// default). Returns EINVALID for any other name.
func ParseStatsWindow(name string) (string, time.Duration, error) {
	if name == "" {
		name = DefaultStatsWindow
	}
	for _, w := range StatsWindows {
		if w.Name == name {
			return w.Name, w.Length, nil
		}
	}
	return "", 0, Errorf(EINVALID, "window must be 24h, 7d or 30d.")
}

// DecisionRecord is one human decision, as the stats read it.
type DecisionRecord struct {
	Reviewer string    // the deciding reviewer's e-mail
	Verdict  string    // the human's
	Agent    *string   // the agent's last verdict on the task, if it gave one
	Waiting  Timestamp // when the task went to a human
	Decided  Timestamp
}

// WaitingTask is a task in the human queue, as the stats read it.
type WaitingTask struct {
	Since Timestamp // when it went to a human
}

// ReviewerStats summarizes decisions: how many, how long they took from
// human_needed to decision, and how often the human disagreed with the
// agent's verdict (of the decisions where the agent gave one).
type ReviewerStats struct {
	Reviewer      string // "" for the team
	Decisions     int
	Median, P90   time.Duration
	Compared      int // decisions where the agent had given a verdict
	Disagreements int
}

// DisagreementRate is Disagreements over Compared, or -1 with nothing to
// compare.
func (s ReviewerStats) DisagreementRate() float64 {
	if s.Compared == 0 {
		return -1
	}
	return float64(s.Disagreements) / float64(s.Compared)
}

// DeskStats is the desk's stats over a window, and the queue now.
type DeskStats struct {
	Window    string
	Team      ReviewerStats
	Reviewers []ReviewerStats // by e-mail
	// Waiting is how many tasks wait now, and their ages: median, 90th
	// percentile and oldest.
	Waiting                   int
	AgeP50, AgeP90, AgeOldest time.Duration
	// Truncated says the window held more decisions or waiting tasks than
	// MaxStatsRows, so the numbers are of the latest.
	Truncated bool
}

// SummarizeDesk computes the desk's stats from the window's decisions and
// the tasks waiting at now.
func SummarizeDesk(window string, decisions []DecisionRecord, waiting []WaitingTask, now Timestamp) DeskStats {
	s := DeskStats{Window: window, Waiting: len(waiting)}
	byReviewer := map[string][]DecisionRecord{}
	for _, d := range decisions {
		byReviewer[d.Reviewer] = append(byReviewer[d.Reviewer], d)
	}
	s.Team = summarizeDecisions("", decisions)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range byReviewer {
			if !yield(k) {
				return
			}
		}
	}) {
		s.Reviewers = append(s.Reviewers, summarizeDecisions(name, byReviewer[name]))
	}
	ages := make([]float64, len(waiting))
	for i, w := range waiting {
		ages[i] = float64(max(0, now-w.Since))
	}
	slices.Sort(ages)
	if len(ages) > 0 {
		s.AgeP50 = msDuration(Percentile(ages, 0.5))
		s.AgeP90 = msDuration(Percentile(ages, 0.9))
		s.AgeOldest = msDuration(ages[len(ages)-1])
	}
	return s
}

// summarizeDecisions summarizes one reviewer's (or the team's) decisions.
func summarizeDecisions(reviewer string, decisions []DecisionRecord) ReviewerStats {
	s := ReviewerStats{Reviewer: reviewer, Decisions: len(decisions)}
	took := make([]float64, 0, len(decisions))
	for _, d := range decisions {
		took = append(took, float64(max(0, d.Decided-d.Waiting)))
		if d.Agent != nil {
			s.Compared++
			if *d.Agent != d.Verdict {
				s.Disagreements++
			}
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		s.Median = msDuration(Percentile(took, 0.5))
		s.P90 = msDuration(Percentile(took, 0.9))
	}
	return s
}

// Percentile returns the p-th percentile (0 to 1) of sorted values, by
// linear interpolation between the closest ranks; NaN for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := p * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}

// msDuration turns milliseconds into a duration, rounded to the second.
func msDuration(ms float64) time.Duration {
	return (time.Duration(ms) * time.Millisecond).Round(time.Second)
}

// StatsService reads what the desk's stats summarize.
type StatsService interface {
	// ListDecisions returns the account's human decisions made since the
	// instant, newest first, at most MaxStatsRows+1 of them (one more
	// than is summarized, to tell a truncated window).
	ListDecisions(ctx context.Context, accountID string, since Timestamp) ([]DecisionRecord, error)

	// ListWaiting returns when each of the account's tasks waiting for a
	// human went to one, at most MaxStatsRows+1 of them, and the
	// database's now.
	ListWaiting(ctx context.Context, accountID string) ([]WaitingTask, Timestamp, error)
}
