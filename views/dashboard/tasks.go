package dashboard

import (
	"fmt"
	"strconv"

	"github.com/arbiterhq/arbiter"
)

// statusLabel names a task status for people.
func statusLabel(status string) string {
	switch status {
	case arbiter.StatusPending:
		return "Pending"
	case arbiter.StatusAgentRunning:
		return "With the verifier"
	case arbiter.StatusHumanNeeded:
		return "Waiting for a human"
	case arbiter.StatusCompleted:
		return "Completed"
	case arbiter.StatusExpired:
		return "Expired"
	}
	return status
}

// statusColour is a task status's badge colour.
func statusColour(status string) string {
	switch status {
	case arbiter.StatusCompleted:
		return "green"
	case arbiter.StatusHumanNeeded:
		return "amber"
	case arbiter.StatusAgentRunning:
		return "blue"
	}
	return "grey"
}

// orDash is s, or an en dash standing for nothing.
func orDash(s *string) string {
	if s == nil || *s == "" {
		return "–"
	}
	return *s
}

// percent writes a confidence as a percentage, or an en dash.
func percent(c *float64) string {
	if c == nil {
		return "–"
	}
	return strconv.Itoa(int(*c*100+0.5)) + "%"
}

// attemptWho names who made an attempt: the reviewer, the task's deadline
// outcome, or the verifier's model (as the desk names it: "none" for the
// verifier that decides nothing).
func attemptWho(a arbiter.Attempt) string {
	switch a.Tier {
	case arbiter.TierHuman:
		return "Reviewer " + orDash(a.Reviewer)
	case arbiter.TierFallback:
		return "Deadline outcome"
	}
	if a.Model != nil && *a.Model != "" {
		return "Verifier " + *a.Model
	}
	return "Verifier"
}

func itoa(n int) string { return strconv.Itoa(n) }

// decidedBy says what decided a task, in the words of the desk: "the
// agent (95%)", "a person", "the deadline outcome"; for a gold task, whose
// verdict is the answer the account knew, "Gold answer (the reviewer said
// reject)". "–" while nothing has.
func decidedBy(t *arbiter.Task) string {
	if t.FinalTier == nil {
		return "–"
	}
	switch *t.FinalTier {
	case arbiter.TierFallback:
		return "Deadline outcome"
	case arbiter.TierAgent:
		return "The agent (" + percent(t.FinalConfidence) + ")"
	}
	if t.GoldVerdict != nil {
		for i := len(t.Attempts) - 1; i >= 0; i-- {
			if a := t.Attempts[i]; a.Tier == arbiter.TierHuman && !a.Audit && a.Verdict != nil {
				return "Gold answer (the reviewer said " + *a.Verdict + ")"
			}
		}
		return "Gold answer"
	}
	return "A person"
}

// voteCount says how many people voted on a task that asks several votes,
// "1 of 2 votes", never what they voted.
func voteCount(t *arbiter.Task) string {
	c := arbiter.VoteCountOf(t)
	return fmt.Sprintf("%d of %d votes", c.Votes, c.ReviewsRequired)
}
