package client

import (
	"context"
	"net/http"
	"strconv"
)

// AgreementReport is how much the account's reviewers agree on the tasks
// that asked several votes (GET /v1/agreement). A figure is nil where it is
// undefined.
type AgreementReport struct {
	Tasks int      `json:"tasks"`
	Pairs int      `json:"pairs"`
	Raw   *float64 `json:"raw"`
	// FirstTwo is the agreement of each task's first two votes, as two
	// raters: Cohen's κ and Gwet's AC1.
	FirstTwo struct {
		N     int      `json:"n"`
		Raw   *float64 `json:"raw"`
		Kappa *float64 `json:"kappa"`
		AC1   *float64 `json:"ac1"`
	} `json:"first_two"`
	// Alpha is Krippendorff's α for nominal data over every vote.
	Alpha     *float64            `json:"alpha"`
	Reviewers []ReviewerAgreement `json:"reviewers"`
}

// ReviewerAgreement is one reviewer's line of the agreement report.
type ReviewerAgreement struct {
	Email         string   `json:"email"`
	Votes         int      `json:"votes"`
	WithConsensus *float64 `json:"with_consensus"`
	AgentVotes    int      `json:"agent_votes"`
	WithAgent     *float64 `json:"with_agent"`
	// GoldAnswered counts the gold tasks the reviewer answered,
	// GoldCorrect those answered with the gold verdict, and GoldAccuracy
	// is the share (nil without any).
	GoldAnswered int      `json:"gold_answered"`
	GoldCorrect  int      `json:"gold_correct"`
	GoldAccuracy *float64 `json:"gold_accuracy"`
}

// Agreement returns the reviewers' agreement over the tasks decided in
// the last days (1 to 365; 0 for the server's default, 30).
func (c *Client) Agreement(ctx context.Context, days int) (*AgreementReport, error) {
	path := "/v1/agreement"
	if days != 0 {
		path += "?days=" + strconv.Itoa(days)
	}
	var r AgreementReport
	if err := c.do(ctx, call{method: http.MethodGet, path: path, auth: true}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
