package arbiter

import (
	"context"
	"strconv"
	"strings"
)

// Gold tasks: a create may carry gold_verdict, the answer the account
// already knows. A gold task goes straight to people (the agent never
// decides it), is served on the desk at the account's gold rate, looks
// like any other task to its reviewer, and completes with its gold
// verdict; the reviewer's answer, recorded as their attempt, counts toward
// their accuracy on gold tasks in the agreement report, never toward
// consensus or calibration. The gold verdict itself is shown only to the
// account's own API reads and to its owners and admins.

// DefaultGoldRate is the gold rate of an account that did not set one:
// one ask for the next task in ten serves a waiting gold task first.
const DefaultGoldRate = 0.1

var errGoldRate = Errorf(EINVALID, "The gold rate must be a share from 0 to 1 (a percentage from 0%% to 100%%).")

// CheckGoldRate returns EINVALID unless rate is a share from 0 to 1.
func CheckGoldRate(rate float64) error {
	if !(rate >= 0 && rate <= 1) {
		return errGoldRate
	}
	return nil
}

// ParseGoldPercent reads a gold rate typed as a percentage, with or
// without its sign: "10" or "10%" is 0.1. Returns EINVALID otherwise.
func ParseGoldPercent(s string) (float64, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if s == "" || len(s) > 32 || strings.Trim(s, "0123456789.") != "" {
		return 0, errGoldRate // plain decimals only: no signs, exponents or hex
	}
	percent, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errGoldRate
	}
	rate := percent / 100
	if err := CheckGoldRate(rate); err != nil {
		return 0, err
	}
	return rate, nil
}

// GoldFirst reports whether an ask for the next task on the desk looks for
// a waiting gold task before the rest of the queue: when draw, uniform in
// [0, 1), falls below the account's gold rate. Whichever side goes first,
// the other is served when it has nothing for the reviewer, so a gold task
// never waits while a reviewer is idle, and a rate of 0 serves gold tasks
// only to a reviewer with nothing else to do.
func GoldFirst(rate, draw float64) bool { return draw < rate }

// GoldAnswer is one reviewer's answer to a gold task, as the agreement
// report reads it.
type GoldAnswer struct {
	TaskID  string
	Email   string
	Verdict string
	Gold    string
}

// AddGold adds the reviewers' accuracy on gold tasks to the report: per
// reviewer, how many gold tasks they answered, how many with the gold
// verdict, and the share (nil without any). A reviewer who answered only
// gold tasks gets a line with no votes. Gold answers take no part in the
// team's agreement, which is about tasks decided together.
func (r *AgreementReport) AddGold(answers []GoldAnswer) {
	byEmail := map[string]int{}
	for i, line := range r.Reviewers {
		byEmail[line.Email] = i
	}
	for _, a := range answers {
		i, ok := byEmail[a.Email]
		if !ok {
			r.Reviewers = append(r.Reviewers, ReviewerAgreement{Email: a.Email})
			i = len(r.Reviewers) - 1
			byEmail[a.Email] = i
		}
		line := &r.Reviewers[i]
		line.GoldAnswered++
		if a.Verdict == a.Gold {
			line.GoldCorrect++
		}
		share := float64(line.GoldCorrect) / float64(line.GoldAnswered)
		line.GoldAccuracy = &share
	}
	sortReviewers(r.Reviewers)
}

// GoldService reads the gold verdicts of an account's tasks.
type GoldService interface {
	// GoldVerdicts returns, by task id, the gold verdicts of those of the
	// account's tasks among ids that carry one.
	GoldVerdicts(ctx context.Context, accountID string, ids []string) (map[string]string, error)
}

// OutcomeForReviewers is the verdict that reviewers see as the task's
// outcome (the desk's "already decided", Slack's outcome line): for a task
// one person decided, that person's answer, which is its final verdict
// except on a gold task, whose reviewer never learns the gold verdict; for
// any other task, its final verdict.
func (t *Task) OutcomeForReviewers() *string {
	if t.FinalTier != nil && *t.FinalTier == TierHuman && (t.Review == nil || !t.Review.Multi()) {
		for i := len(t.Attempts) - 1; i >= 0; i-- {
			if a := t.Attempts[i]; a.Tier == TierHuman && !a.Audit && a.Verdict != nil {
				return a.Verdict
			}
		}
	}
	return t.FinalVerdict
}

// MayBeGold reports whether t can be a gold task, so that a read of its
// gold verdict is worth a query: a gold task waits for people from its
// create on, and the agent never answers it. Most tasks (pending, with
// the agent, or answered by it) cannot be, and their reads stay one
// statement.
func (t *Task) MayBeGold() bool {
	if t.Status == StatusPending || t.Status == StatusAgentRunning {
		return false
	}
	for _, a := range t.Attempts {
		if a.Tier == TierAgent {
			return false
		}
	}
	return true
}
