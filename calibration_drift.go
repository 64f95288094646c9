package arbiter

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// Drift.
//
// A certificate holds for the agent it was computed on. A new prompt, a new
// model or new kinds of tasks can make the agent wrong more often above its
// threshold, and the audits are where that shows first: each is a uniform
// draw of the agent's confident answers. Drift is watched per policy, at
// the target the policy holds the agent to (Policy.Target: the target its
// certified threshold was applied at, or one set by hand), else at the
// default policy's, else at the account's defaults (2% at 95%). Over a
// rolling window of the latest blind audits of the task types a policy
// governs, the policy has drifted when the audits show, with the target's
// confidence, that the error rate above the threshold exceeds the target:
// the one-sided Clopper–Pearson lower bound of the window's error rate is
// above α. Noise under that bound never fires, and nor does a window of
// fewer than MinDriftAudits audits (or the whole window, when it is
// smaller): one wrong answer among the first few audits says little. The
// account is told once per crossing; it is ready to be told again once
// the window's error rate is back at or under α.

// The drift window's defaults: the latest DefaultDriftAudits blind audits
// answered within DefaultDriftAge.
const (
	DefaultDriftAudits = 200
	DefaultDriftAge    = 30 * 24 * time.Hour
)

// MinDriftAudits is the fewest audits a window needs before it can cross.
const MinDriftAudits = 20

// DriftSettings are the window and the bound drift is checked against.
type DriftSettings struct {
	Audits     int           // the latest this many audits
	Age        time.Duration // answered within this long
	Target     float64       // α
	Confidence float64       // 1−δ
}

// Targeting returns s with the target and confidence of t, when t is not
// nil: the settings of a policy that holds the agent to t.
func (s DriftSettings) Targeting(t *ErrorTarget) DriftSettings {
	if t != nil {
		s.Target, s.Confidence = t.ErrorRate, t.Confidence
	}
	return s
}

// DefaultDriftSettings are the window of DefaultDriftAudits and
// DefaultDriftAge, against DefaultTargetErrorRate at
// DefaultCertificationConfidence.
var DefaultDriftSettings = DriftSettings{Audits: DefaultDriftAudits, Age: DefaultDriftAge,
	Target: DefaultTargetErrorRate, Confidence: DefaultCertificationConfidence}

// DriftWindow is what the store counts in the window: the blind audits and
// those a person disagreed with.
type DriftWindow struct {
	Audits, Errors int
}

// ErrorLower returns the window's one-sided Clopper–Pearson lower bound at
// the confidence: the (1−confidence) quantile of Beta(k, n−k+1); 0 with no
// error.
func (w DriftWindow) ErrorLower(confidence float64) float64 {
	if w.Errors <= 0 || w.Audits <= 0 {
		return 0
	}
	k, n := float64(min(w.Errors, w.Audits)), float64(w.Audits)
	return BetaQuantile(1-confidence, k, n-k+1)
}

// ErrorRate returns the window's error rate, 0 without audits.
func (w DriftWindow) ErrorRate() float64 {
	if w.Audits <= 0 {
		return 0
	}
	return float64(w.Errors) / float64(w.Audits)
}

// NextDrift is the drift rule: given whether the account is drifted now
// and its window, it returns whether it is drifted after, and whether this
// is a crossing to tell the account about. An account drifts when the
// window's lower bound exceeds the target, and stops when its error rate is
// back at or under the target; in between, it stays as it was.
func NextDrift(drifted bool, w DriftWindow, s DriftSettings) (after, crossed bool) {
	switch {
	case !drifted && w.Audits >= min(MinDriftAudits, s.Audits) && w.ErrorLower(s.Confidence) > s.Target+1e-12:
		return true, true
	case drifted && w.ErrorRate() <= s.Target:
		return false, false
	}
	return drifted, false
}

// Drift is one crossing: when the account drifted, what the window held
// then, and when it came back (nil while it is drifted).
type Drift struct {
	AccountID string `json:"-"`
	// TaskType names the policy whose audits drifted: a task type, or
	// DefaultPolicyName for the default policy's (every type without
	// its own).
	TaskType   string     `json:"task_type"`
	TaskID     string     `json:"task_id"` // the audit that crossed
	Audits     int        `json:"audits"`
	Errors     int        `json:"errors"`
	ErrorRate  float64    `json:"error_rate"`
	ErrorLower float64    `json:"error_lower"`
	Target     float64    `json:"target_error_rate"`
	Confidence float64    `json:"confidence"`
	DriftedAt  Timestamp  `json:"drifted_at"`
	ClearedAt  *Timestamp `json:"cleared_at"`
}

// NewDrift returns the crossing the window w of the policy of taskType
// makes for the account at now, on the audit of taskID.
func NewDrift(accountID, taskType, taskID string, w DriftWindow, s DriftSettings, now Timestamp) Drift {
	return Drift{AccountID: accountID, TaskType: taskType, TaskID: taskID, Audits: w.Audits, Errors: w.Errors, ErrorRate: w.ErrorRate(),
		ErrorLower: w.ErrorLower(s.Confidence), Target: s.Target, Confidence: s.Confidence, DriftedAt: now}
}

// Summary says the crossing in one sentence, for the banner and the mail.
func (d Drift) Summary() string {
	return fmt.Sprintf("The agent's audited error rate under %s has drifted above its %s target: %d of the latest %d blind audits were wrong (%s; at least %s with %s confidence).",
		PolicyName(cmp.Or(d.TaskType, DefaultPolicyName)), FormatShare(d.Target), d.Errors, d.Audits, FormatShare(d.ErrorRate),
		FormatShare(d.ErrorLower), FormatShare(d.Confidence))
}

// SummaryThen says the crossing as it stands later, for the banner that
// stays up until the window recovers: when it was taken, and that its
// figures are that moment's ("On 2026-11-26 14:32 UTC the agent's audited
// error rate drifted above the 2% target: 6 of the latest 200 blind audits
// were wrong then (…)."). The report's own figures are the current ones.
func (d Drift) SummaryThen() string {
	return fmt.Sprintf("On %s the agent's audited error rate under %s drifted above its %s target: %d of the latest %d blind audits were wrong then (%s; at least %s with %s confidence).",
		d.DriftedAt.Time().UTC().Format("2006-01-02 15:04 UTC"), PolicyName(cmp.Or(d.TaskType, DefaultPolicyName)), FormatShare(d.Target),
		d.Errors, d.Audits, FormatShare(d.ErrorRate), FormatShare(d.ErrorLower), FormatShare(d.Confidence))
}

// DriftMail is the mail that tells an owner or admin of the account about
// a crossing.
type DriftMail struct {
	Drift
	AccountName string
	Email       string
}

// Subject is the drift mail's subject.
func (m DriftMail) Subject() string {
	return "Calibration drift in " + m.AccountName
}

// Body is the drift mail's text, with the link to the calibration report.
func (m DriftMail) Body(reportURL string) string {
	return strings.Join([]string{
		"Hello,",
		"",
		m.Summary(),
		"",
		"The threshold certified before may no longer hold. Look at the calibration report: " + cmp.Or(reportURL, "Calibration, on the dashboard") + ".",
		"",
		"You get this once per crossing, as an owner or admin of the account.",
		"",
		"— Arbiter",
	}, "\r\n")
}
