package arbiter

import "slices"

// Task events: what a change of a task announces. A transition in the
// store publishes its events in its own transaction (db/tx.go, publish),
// and every outbound channel (webhooks, Slack, mail) writes its messages
// from them there: an outbox, so nothing announced is lost when a process
// dies, and nothing is announced that did not commit.

// Event types. Those an endpoint subscribes to are listed in
// WebhookEventTypes; to add one, declare it here, list it there, and
// publish it from the transition that causes it. The internal types
// (InternalEventTypes) reach the outbound channels but never an endpoint.
const (
	EventTaskHumanNeeded = "task.human_needed" // the agent handed the task to a person
	EventTaskCompleted   = "task.completed"    // the agent or a person decided it
	EventTaskExpired     = "task.expired"      // its deadline passed first
	// EventTaskAuditDisagreed: a person's blind audit of a task the agent
	// completed disagrees with the agent's verdict (the task keeps it).
	EventTaskAuditDisagreed = "task.audit_disagreed"
	EventPing               = "ping" // "Send test event" on the dashboard
	// EventTaskVoteRecorded: a person voted on a task that asks several
	// votes and the task is not decided yet; the payload's data is a
	// VoteCount, never the verdict.
	EventTaskVoteRecorded = "task.vote_recorded"
	// EventCalibrationDrifted: the account's audited error rate crossed
	// above its target (NextDrift); the payload's data is the Drift.
	EventCalibrationDrifted = "calibration.drifted"
	// EventTaskEscalated: a task waiting for a person reached a rung of
	// its escalation (escalation.go); the payload's data is the task,
	// whose escalation names the rung.
	EventTaskEscalated = "task.escalated"
)

// Internal event types: changes the outbound channels act on that no
// endpoint is told of.
const (
	// EventTaskReminded: a reminder of a task waiting for a person came
	// due; Slack asks again and the reviewers are mailed.
	EventTaskReminded = "task.reminded"
	// EventTaskAuditAnswered: a person answered a task's blind audit; its
	// Slack copies show the answer.
	EventTaskAuditAnswered = "task.audit_answered"
)

// InternalEventTypes are the event types no endpoint or callback receives.
var InternalEventTypes = []string{EventTaskReminded, EventTaskAuditAnswered}

// TaskEvent is one event about one task, published by the transition
// that caused it; an event of the account a task caused
// (calibration.drifted) names the task too.
type TaskEvent struct {
	Type      string
	TaskID    string
	AccountID string
	// CallbackURL is the task's callback_url, which receives its events
	// too; "" without one.
	CallbackURL string
	// Drift is the crossing a calibration.drifted event announces.
	Drift *Drift
	// TraceParent is the W3C trace context of the span that made the
	// event, which its outbox messages keep; "" for the publishing
	// transaction's own (a grouped write publishes events of many).
	TraceParent string
}

// TaskEventOf returns the event type of a task reaching status, or "" for a
// status no event announces.
func TaskEventOf(status string) string {
	switch status {
	case StatusHumanNeeded:
		return EventTaskHumanNeeded
	case StatusCompleted:
		return EventTaskCompleted
	case StatusExpired:
		return EventTaskExpired
	}
	return ""
}

// FinalEvent reports whether an event of the type ends its task: the
// requests waiting for the task are answered when it commits.
func FinalEvent(eventType string) bool {
	return eventType == EventTaskCompleted || eventType == EventTaskExpired
}

// Announced reports whether an event of the type is sent to the endpoints
// that subscribe to it (WebhookEventTypes); internal events are not.
func Announced(eventType string) bool { return slices.Contains(WebhookEventTypes, eventType) }
