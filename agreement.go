package arbiter

import (
	"context"
	"sort"
)

// AgreementTask is one decided task that asked several votes, as the
// agreement report reads it: the agent's verdict (nil when the agent gave
// none), the consensus (the final verdict) and the votes in the order
// cast.
type AgreementTask struct {
	TaskID    string
	Agent     *string
	Consensus string
	Votes     []Vote
}

// ReviewerAgreement is one reviewer's line of the agreement report: how
// many votes they cast, and the share of them that named the consensus
// and, on tasks the agent answered, the agent's verdict (nil without any).
type ReviewerAgreement struct {
	Email         string   `json:"email"`
	Votes         int      `json:"votes"`
	WithConsensus *float64 `json:"with_consensus"`
	AgentVotes    int      `json:"agent_votes"`
	WithAgent     *float64 `json:"with_agent"`
	// GoldAnswered counts the gold tasks the reviewer answered,
	// GoldCorrect those answered with the gold verdict; GoldAccuracy is
	// the share (nil without any). See AddGold.
	GoldAnswered int      `json:"gold_answered"`
	GoldCorrect  int      `json:"gold_correct"`
	GoldAccuracy *float64 `json:"gold_accuracy"`
}

// AgreementReport is how much an account's reviewers agree on the tasks
// they voted on together.
type AgreementReport struct {
	// Tasks counts the decided tasks with two votes or more.
	Tasks int `json:"tasks"`
	// Pairs counts the pairs of votes on one task; Raw is the share of
	// them that agree (nil without pairs).
	Pairs int      `json:"pairs"`
	Raw   *float64 `json:"raw"`
	// FirstTwo is Agreement of each task's first two votes, as two
	// raters: its AC1 is Gwet's AC1 (and κ Cohen's) for the team.
	FirstTwo AgreementStats `json:"first_two"`
	// Alpha is Krippendorff's α for nominal data over every vote, any
	// number of reviewers per task; nil when undefined (fewer than two
	// values, or a single verdict everywhere).
	Alpha     *float64            `json:"alpha"`
	Reviewers []ReviewerAgreement `json:"reviewers"`
}

// TeamAgreement computes the AgreementReport of the tasks. Krippendorff's
// α (nominal) is 1 − (n−1)·Σ_{c≠k} o_ck / Σ_{c≠k} n_c·n_k, where o is the
// coincidence matrix (each ordered pair of votes on a task with m votes
// adds 1/(m−1)), n_c its margins and n their sum. Reviewers come in order
// of e-mail.
func TeamAgreement(tasks []AgreementTask) AgreementReport {
	var r AgreementReport
	var agreePairs int
	var firstTwo []VerdictAgreement
	coincidence := map[[2]string]float64{}
	type tally struct{ votes, consensus, agentVotes, agent int }
	byReviewer := map[string]*tally{}
	for _, t := range tasks {
		for _, v := range t.Votes {
			tl := byReviewer[v.Email]
			if tl == nil {
				tl = &tally{}
				byReviewer[v.Email] = tl
			}
			tl.votes++
			if v.Verdict == t.Consensus {
				tl.consensus++
			}
			if t.Agent != nil {
				tl.agentVotes++
				if v.Verdict == *t.Agent {
					tl.agent++
				}
			}
		}
		m := len(t.Votes)
		if m < 2 {
			continue
		}
		r.Tasks++
		firstTwo = append(firstTwo, VerdictAgreement{AgentVerdict: t.Votes[0].Verdict, HumanVerdict: t.Votes[1].Verdict, N: 1})
		for i := range t.Votes {
			for j := range t.Votes {
				if i == j {
					continue
				}
				coincidence[[2]string{t.Votes[i].Verdict, t.Votes[j].Verdict}] += 1 / float64(m-1)
				if i < j {
					r.Pairs++
					if t.Votes[i].Verdict == t.Votes[j].Verdict {
						agreePairs++
					}
				}
			}
		}
	}
	if r.Pairs > 0 {
		raw := float64(agreePairs) / float64(r.Pairs)
		r.Raw = &raw
	}
	r.FirstTwo = Agreement(firstTwo)
	r.Alpha = nominalAlpha(coincidence)
	for email, tl := range byReviewer {
		line := ReviewerAgreement{Email: email, Votes: tl.votes, AgentVotes: tl.agentVotes}
		if tl.votes > 0 {
			share := float64(tl.consensus) / float64(tl.votes)
			line.WithConsensus = &share
		}
		if tl.agentVotes > 0 {
			share := float64(tl.agent) / float64(tl.agentVotes)
			line.WithAgent = &share
		}
		r.Reviewers = append(r.Reviewers, line)
	}
	sortReviewers(r.Reviewers)
	return r
}

// sortReviewers orders the report's lines by e-mail.
func sortReviewers(lines []ReviewerAgreement) {
	sort.Slice(lines, func(i, j int) bool { return lines[i].Email < lines[j].Email })
}

// nominalAlpha is Krippendorff's α of a coincidence matrix, nil where it is
// undefined.
func nominalAlpha(o map[[2]string]float64) *float64 {
	margins := map[string]float64{}
	var n, disagree float64
	for ck, w := range o {
		margins[ck[0]] += w
		n += w
		if ck[0] != ck[1] {
			disagree += w
		}
	}
	var expected float64
	for c, nc := range margins {
		for k, nk := range margins {
			if c != k {
				expected += nc * nk
			}
		}
	}
	if n < 2 || expected == 0 {
		return nil
	}
	alpha := 1 - (n-1)*disagree/expected
	return &alpha
}

// AgreementService reads what the agreement report needs.
type AgreementService interface {
	// ListAgreementTasks returns the account's tasks that asked several
	// votes and were decided at or after since (by completed_at), with
	// their votes in the order cast and the agent's last verdict.
	ListAgreementTasks(ctx context.Context, accountID string, since Timestamp) ([]AgreementTask, error)
	// ListGoldAnswers returns the reviewers' answers to the account's
	// gold tasks decided at or after since (by completed_at).
	ListGoldAnswers(ctx context.Context, accountID string, since Timestamp) ([]GoldAnswer, error)
}
