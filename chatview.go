package arbiter

import (
	"bytes"
	"encoding/json"
)

// What a chat message (Slack's, Teams') shows of a task, read the same way
// for every chat: how it ended, the verifier's answer, and its context's
// first fields. Each chat writes them in its own markup.

// Task outcome states (TaskOutcome.State).
const (
	OutcomeWaiting   = "waiting"   // still waits for a decision
	OutcomeCompleted = "completed" // decided: by a person, the verifier or the fallback
	OutcomeExpired   = "expired"   // its deadline passed undecided
	OutcomeAudited   = "audited"   // the verifier's answer was audited blind
)

// TaskOutcome is how a task's question was answered, as a chat copy of it
// says so.
type TaskOutcome struct {
	State string
	// Verdict is the outcome reviewers see (OutcomeForReviewers), for
	// OutcomeCompleted.
	Verdict string
	// By is the reviewer who decided or audited it, "" for the verifier
	// or a fallback.
	By string
	// At is when it ended, 0 when unknown.
	At Timestamp
}

// OutcomeOf says how t's question was answered: its blind audit answered,
// expired, completed (by whom, when), or still waiting.
func OutcomeOf(t *Task) TaskOutcome {
	if t.AuditState == AuditStateDone {
		if a := t.lastReviewerAnswer(true); a != nil {
			return TaskOutcome{State: OutcomeAudited, By: *a.Reviewer, At: finishedAt(a)}
		}
	}
	switch {
	case t.Status == StatusExpired:
		o := TaskOutcome{State: OutcomeExpired}
		if t.ExpiredAt != nil {
			o.At = *t.ExpiredAt
		}
		return o
	case t.Status == StatusCompleted && t.FinalVerdict != nil:
		o := TaskOutcome{State: OutcomeCompleted, Verdict: *t.OutcomeForReviewers()}
		if a := t.lastReviewerAnswer(false); a != nil && t.FinalTier != nil && *t.FinalTier == TierHuman {
			o.By = *a.Reviewer
		}
		if t.CompletedAt != nil {
			o.At = *t.CompletedAt
		}
		return o
	}
	return TaskOutcome{State: OutcomeWaiting}
}

// LastAgentAnswer returns the verifier's last answer with a verdict and a
// confidence, nil when it gave none.
func (t *Task) LastAgentAnswer() *Attempt {
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := &t.Attempts[i]; a.Tier == TierAgent && a.Verdict != nil && a.Confidence != nil {
			return a
		}
	}
	return nil
}

// lastReviewerAnswer returns a person's last answer: an audit's, or a
// decision's.
func (t *Task) lastReviewerAnswer(audit bool) *Attempt {
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := &t.Attempts[i]; a.Tier == TierHuman && a.Reviewer != nil && a.Audit == audit {
			return a
		}
	}
	return nil
}

func finishedAt(a *Attempt) Timestamp {
	if a.FinishedAt != nil {
		return *a.FinishedAt
	}
	return a.StartedAt
}

// ContextFields returns up to n of a JSON object's fields in their order,
// each value as text (a string as it is, anything else as compact JSON);
// nothing for anything but an object.
func ContextFields(raw json.RawMessage, n int) (keys, values []string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil
	}
	for dec.More() && len(keys) < n {
		tok, err := dec.Token()
		if err != nil {
			return keys, values
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return keys, values
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			var buf bytes.Buffer
			if json.Compact(&buf, v) == nil {
				s = buf.String()
			} else {
				s = string(v)
			}
		}
		keys, values = append(keys, k), append(values, s)
	}
	return keys, values
}
