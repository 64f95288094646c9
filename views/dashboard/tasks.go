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

// attemptWho names who made an attempt: the reviewer, or the verifier's
// model.
func attemptWho(a arbiter.Attempt) string {
	if a.Tier == arbiter.TierHuman {
		return "Reviewer " + orDash(a.Reviewer)
	}
	if a.Model != nil && *a.Model != "" {
		return "Verifier " + *a.Model
	}
	return "Verifier"
}

func itoa(n int) string { return strconv.Itoa(n) }

// voteCount says how many people voted on a task that asks several votes,
// "1 of 2 votes", never what they voted.
func voteCount(t *arbiter.Task) string {
	c := arbiter.VoteCountOf(t)
	return fmt.Sprintf("%d of %d votes", c.Votes, c.ReviewsRequired)
}
