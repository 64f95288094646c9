package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Policy is how the account handles tasks of one task type: the values a
// create takes for the fields it leaves out. The policy named "default"
// applies to every task type without its own. A nil field is not set.
// Changing a policy never changes tasks already created.
type Policy struct {
	// TaskType is the task type it applies to (read only; the path names
	// it).
	TaskType            string   `json:"-"`
	ConfidenceThreshold *float64 `json:"confidence_threshold"`
	DeadlineSeconds     *int     `json:"deadline_seconds"`
	AuditRate           *float64 `json:"audit_rate"`
	// OnExpiry, AgentFloor and OnExpiryFallback are as TaskCreate's;
	// "expire" (or empty) leaves the task to expire.
	OnExpiry         string   `json:"on_expiry,omitempty"`
	AgentFloor       *float64 `json:"agent_floor"`
	OnExpiryFallback *string  `json:"on_expiry_fallback"`
	// Notify is as TaskCreate's: where the question of a task of the type
	// goes when its create names no channel; the default policy's is the
	// account's default.
	Notify []string `json:"notify,omitempty"`
	// ReviewsRequired, Consensus, Quorum, Veto, ExcludeRequester and
	// Tiebreak are as TaskCreate's: the review requirement a create of the
	// type takes when it gives none of them (its RequestedBy stays its
	// own). Zero values are not set.
	ReviewsRequired  int      `json:"reviews_required,omitempty"`
	Consensus        string   `json:"consensus,omitempty"`
	Quorum           int      `json:"quorum,omitempty"`
	Veto             []string `json:"veto,omitempty"`
	ExcludeRequester bool     `json:"exclude_requester,omitempty"`
	Tiebreak         string   `json:"tiebreak,omitempty"`
	// Reminders and Escalation are as TaskCreate's; nil for none.
	Reminders  []string         `json:"reminders,omitempty"`
	Escalation []EscalationRung `json:"escalation,omitempty"`
	// TargetErrorRate and TargetConfidence are the error rate the policy
	// holds the verifier to and its confidence: applying a certified
	// threshold sets them, and drift is watched against them. nil for
	// none (the default policy's, else 2% at 95%).
	TargetErrorRate  *float64 `json:"target_error_rate,omitempty"`
	TargetConfidence *float64 `json:"target_confidence,omitempty"`
	// Cascade, Thresholds, Certified and RequirePersonIf are the policy's
	// say on the agent tier's cascade: the verifiers asked in order, each
	// one's threshold, certified mode's target, and the CEL expression
	// that sends a task to people first. Nil for none.
	Cascade         []string           `json:"cascade,omitempty"`
	Thresholds      map[string]float64 `json:"thresholds,omitempty"`
	Certified       *CertifiedTarget   `json:"certified,omitempty"`
	RequirePersonIf *string            `json:"require_person_if,omitempty"`
	// UpdatedAt is when it was last put (read only).
	UpdatedAt time.Time `json:"-"`
}

// CertifiedTarget is a certified policy's target: each verifier decides at
// its current certificate for it.
type CertifiedTarget struct {
	TargetErrorRate float64 `json:"target_error_rate"`
	Confidence      float64 `json:"confidence"`
}

// UnmarshalJSON reads the API's Policy object.
func (p *Policy) UnmarshalJSON(b []byte) error {
	type fields Policy
	var w struct {
		fields
		TaskType  string `json:"task_type"`
		UpdatedAt epoch  `json:"updated_at"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Policy(w.fields)
	p.TaskType, p.UpdatedAt = w.TaskType, w.UpdatedAt.time()
	return nil
}

// MarshalJSON writes the API's Policy object.
func (p Policy) MarshalJSON() ([]byte, error) {
	type fields Policy
	return json.Marshal(struct {
		TaskType string `json:"task_type"`
		fields
		UpdatedAt epoch `json:"updated_at"`
	}{p.TaskType, fields(p), epoch(p.UpdatedAt)})
}

// ListPolicies returns the account's policies, by task type.
func (c *Client) ListPolicies(ctx context.Context) ([]Policy, error) {
	var out struct {
		Policies []Policy `json:"policies"`
	}
	if err := c.do(ctx, call{method: http.MethodGet, path: "/v1/policies", auth: true}, &out); err != nil {
		return nil, err
	}
	return out.Policies, nil
}

// GetPolicy returns the account's policy of the task type ("default" for
// the default policy). IsNotFound is true of the error when there is none.
func (c *Client) GetPolicy(ctx context.Context, taskType string) (*Policy, error) {
	var p Policy
	if err := c.do(ctx, call{method: http.MethodGet, path: policyPath(taskType), auth: true}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// PutPolicy replaces the account's policy of the task type with p (its
// TaskType and UpdatedAt are not sent) and returns it as stored. IsInvalid
// is true of the error when p is not a valid policy.
func (c *Client) PutPolicy(ctx context.Context, taskType string, p Policy) (*Policy, error) {
	type fields Policy // without MarshalJSON: TaskType and UpdatedAt are not sent
	var out Policy
	if err := c.do(ctx, call{method: http.MethodPut, path: policyPath(taskType), auth: true, body: fields(p), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeletePolicy removes the account's policy of the task type. IsNotFound is
// true of the error when there is none.
func (c *Client) DeletePolicy(ctx context.Context, taskType string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: policyPath(taskType), auth: true}, nil)
}

// policyPath is the path of the policy of the task type.
func policyPath(taskType string) string {
	return "/v1/policies/" + url.PathEscape(taskType)
}
