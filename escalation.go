package arbiter

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reminders and escalation (issue 30): while a task waits for a person,
// its reminders tell again the people who can decide it, and its
// escalation rungs mark it escalated and tell someone higher up. Each
// comes due an AlertWait after the task went to a person; a task records
// the schedule it was created with, and a sweep fires each step once, in the order they come
// due, never after the task left human_needed or its deadline passed.
// Escalation never moves the deadline.

// Limits of a schedule, documented in docs/policies.md.
const (
	// MaxReminders bounds a task's or a policy's reminders.
	MaxReminders = 5
	// MaxEscalationRungs bounds a task's or a policy's escalation rungs.
	MaxEscalationRungs = 5
	// MinAlertWait is the shortest wait of a reminder or rung.
	MinAlertWait = time.Minute
	// MaxAlertWait is the longest: the longest deadline.
	MaxAlertWait = MaxDeadlineSeconds * time.Second
)

// Escalation targets: "role:<role>" tells the account's members with
// that role, "email:<address>" the member who signs in with the address
// (the store refuses a rung to anyone else: RungOutsideAccount).
const (
	EscalateRolePrefix  = "role:"
	EscalateEmailPrefix = "email:"
)

// AlertWait is when a reminder or an escalation rung comes due: After a task
// went to a person, or (Percent, 1 to 99) that share of the time it then
// had until its deadline. Its JSON is a string: "15m", "1h30m", "2d",
// "90%".
type AlertWait struct {
	After   time.Duration
	Percent int
}

var waitPattern = regexp.MustCompile(`^(?:(\d{1,4})d)?(?:(\d{1,5})h)?(?:(\d{1,6})m)?(?:(\d{1,7})s)?$`)

// ParseAlertWait reads a wait: a duration in days, hours, minutes and seconds
// ("15m", "1h30m", "2d") from MinAlertWait to MaxAlertWait, or a share of
// the time to the deadline, "1%" to "99%". Returns EINVALID naming field.
func ParseAlertWait(field, s string) (AlertWait, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 99 || p != strconv.Itoa(n) {
			return AlertWait{}, FieldErrorf(field, "%s: %q is not a share of the deadline; write a whole percent from 1%% to 99%%, such as \"50%%\".", field, s)
		}
		return AlertWait{Percent: n}, nil
	}
	m := waitPattern.FindStringSubmatch(s)
	if s == "" || m == nil {
		return AlertWait{}, FieldErrorf(field, "%s: %q is not a wait; write a duration such as \"15m\", \"1h30m\" or \"2d\", or a share of the deadline such as \"50%%\".", field, s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] != "" {
			n, _ := strconv.Atoi(m[i+1]) // digits only, at most 7
			d += time.Duration(n) * unit
		}
	}
	if d < MinAlertWait || d > MaxAlertWait {
		return AlertWait{}, FieldErrorf(field, "%s: %q must be from 1 minute to 30 days.", field, s)
	}
	return AlertWait{After: d}, nil
}

// String writes the wait as ParseAlertWait reads it, in its shortest form:
// "90%", "1h30m", "2d".
func (w AlertWait) String() string {
	if w.Percent > 0 {
		return strconv.Itoa(w.Percent) + "%"
	}
	var b strings.Builder
	rest := w.After
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := rest / u.unit; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10) + u.name)
			rest -= n * u.unit
		}
	}
	return b.String()
}

// MarshalJSON writes the wait as its string.
func (w AlertWait) MarshalJSON() ([]byte, error) { return json.Marshal(w.String()) }

// UnmarshalJSON reads a wait's string (the store's copy: checked when it
// was written).
func (w *AlertWait) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	parsed, err := ParseAlertWait("wait", s)
	if err != nil {
		return err
	}
	*w = parsed
	return nil
}

// at returns when the wait ends for a task that went to a person at
// human and has deadline (nil without one); false for a share without a
// deadline.
func (w AlertWait) at(human Timestamp, deadline *Timestamp) (Timestamp, bool) {
	if w.Percent == 0 {
		return human + Timestamp(w.After.Milliseconds()), true
	}
	if deadline == nil {
		return 0, false
	}
	return human + (*deadline-human)*Timestamp(w.Percent)/100, true
}

// Rung is one step of a task's escalation: when it waited After, it is
// marked escalated and To is told.
type Rung struct {
	After AlertWait `json:"after"`
	To    string    `json:"to"`
}

// Role returns the role a "role:<role>" rung tells, and whether it is one.
func (r Rung) Role() (string, bool) { return strings.CutPrefix(r.To, EscalateRolePrefix) }

// Email returns the address an "email:<address>" rung tells, and whether
// it is one.
func (r Rung) Email() (string, bool) { return strings.CutPrefix(r.To, EscalateEmailPrefix) }

// Describe names whom the rung tells, for people: "admins",
// "lead@example.com".
func (r Rung) Describe() string {
	if role, ok := r.Role(); ok {
		return strings.ToLower(RoleLabel(role)) + "s"
	}
	email, _ := r.Email()
	return email
}

// checkTarget returns EINVALID unless to is "role:" and a role, or
// "email:" and an address that invitations accept (NormalizeEmail, not
// the demo account's, at a full domain name); it returns to normalized.
func checkTarget(field, to string) (string, error) {
	if role, ok := strings.CutPrefix(to, EscalateRolePrefix); ok {
		if CheckRole(role) != nil {
			return "", FieldErrorf(field, "%s: %q names no role; write role:owner, role:admin or role:reviewer.", field, to)
		}
		return to, nil
	}
	email, ok := strings.CutPrefix(to, EscalateEmailPrefix)
	if !ok {
		return "", FieldErrorf(field, "%s: to must be \"role:<role>\" or \"email:<address>\".", field)
	}
	email, err := NormalizeEmail(email)
	if err == nil && CheckSignInEmail(email) != nil {
		err = Errorf(EINVALID, "The demo account's address cannot be told.")
	}
	if err == nil {
		err = CheckEmailDomain(email, false)
	}
	if err != nil {
		return "", inField(field, Errorf(EINVALID, "%s: %s", field, ErrorMessage(err)))
	}
	return EscalateEmailPrefix + email, nil
}

// Alerts is a task's or a policy's reminders and escalation rungs.
type Alerts struct {
	Reminders  []AlertWait `json:"reminders,omitempty"`
	Escalation []Rung      `json:"escalation,omitempty"`
}

// IsZero reports whether a has neither reminders nor rungs.
func (a Alerts) IsZero() bool { return len(a.Reminders) == 0 && len(a.Escalation) == 0 }

// NeedsDeadline reports whether a waits a share of the deadline.
func (a Alerts) NeedsDeadline() bool {
	for _, w := range a.Reminders {
		if w.Percent > 0 {
			return true
		}
	}
	for _, r := range a.Escalation {
		if r.After.Percent > 0 {
			return true
		}
	}
	return false
}

// RungRequest is the wire form of an escalation rung.
type RungRequest struct {
	After *string `json:"after"`
	To    *string `json:"to"`
}

// ParseReminders checks a list of reminders: up to MaxReminders waits
// (ParseAlertWait), none twice, sorted (durations first, shortest first).
// Returns EINVALID naming "reminders".
func ParseReminders(list []*string) ([]AlertWait, error) {
	if len(list) > MaxReminders {
		return nil, FieldErrorf("reminders", "reminders holds at most %d waits.", MaxReminders)
	}
	out := make([]AlertWait, 0, len(list))
	for _, s := range list {
		if s == nil {
			return nil, FieldErrorf("reminders", "reminders must hold strings such as \"15m\" or \"50%%\", not null.")
		}
		w, err := ParseAlertWait("reminders", *s)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, w) {
			return nil, FieldErrorf("reminders", "reminders holds %q twice.", w.String())
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b AlertWait) int {
		if a.Percent != b.Percent && (a.Percent == 0 || b.Percent == 0) {
			return a.Percent - b.Percent // durations first
		}
		return int(a.After-b.After) + a.Percent - b.Percent
	})
	return out, nil
}

// ParseEscalation checks a list of rungs: up to MaxEscalationRungs, each
// with a wait (ParseAlertWait) and a target (role:<role> or email:<address>),
// all waiting durations or all shares of the deadline, each later than
// the one before. Returns EINVALID naming "escalation".
func ParseEscalation(list []*RungRequest) ([]Rung, error) {
	if len(list) > MaxEscalationRungs {
		return nil, FieldErrorf("escalation", "escalation holds at most %d rungs.", MaxEscalationRungs)
	}
	out := make([]Rung, 0, len(list))
	for i, r := range list {
		if r == nil || r.After == nil || r.To == nil {
			return nil, FieldErrorf("escalation", "escalation: rung %d needs after (such as \"30m\") and to (\"role:admin\" or \"email:lead@example.com\").", i+1)
		}
		w, err := ParseAlertWait("escalation", *r.After)
		if err != nil {
			return nil, err
		}
		to, err := checkTarget("escalation", *r.To)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			prev := out[i-1].After
			if (prev.Percent == 0) != (w.Percent == 0) {
				return nil, FieldErrorf("escalation", "escalation: the rungs wait either durations or shares of the deadline, not both.")
			} else if prev.After >= w.After && prev.Percent >= w.Percent {
				return nil, FieldErrorf("escalation", "escalation: rung %d (%s) must wait longer than rung %d (%s).", i+1, w, i, prev)
			}
		}
		out = append(out, Rung{After: w, To: to})
	}
	return out, nil
}

// alertsRequest is the wire form of a create's reminders and escalation:
// left out (nil), the policy's; null is refused.
type alertsRequest struct {
	Reminders  []*string      `json:"reminders" null:"refuse"`
	Escalation []*RungRequest `json:"escalation" null:"refuse"`
}

// policyAlertsRequest is the wire form of a policy's reminders and
// escalation: left out or null, none, as every field of a policy.
type policyAlertsRequest struct {
	Reminders  []*string      `json:"reminders"`
	Escalation []*RungRequest `json:"escalation"`
}

// alertsJSON is how a policy's answer writes its reminders and
// escalation: [] for none.
type alertsJSON struct {
	Reminders  []AlertWait `json:"reminders"`
	Escalation []Rung      `json:"escalation"`
}

// json returns a's answer form.
func (a Alerts) json() alertsJSON {
	return alertsJSON{Reminders: append([]AlertWait{}, a.Reminders...), Escalation: append([]Rung{}, a.Escalation...)}
}

// alertsTypeErrors name what a wrong JSON type of the fields gets told.
var alertsTypeErrors = map[string]string{
	"reminders":  `reminders must be an array of waits such as "15m" or "50%".`,
	"escalation": `escalation must be an array of rungs such as {"after": "30m", "to": "role:admin"}.`,
}

// AlertStep is one reminder or rung of a task's schedule, at the time it
// comes due.
type AlertStep struct {
	At Timestamp
	// Rung is the rung's number, from 1; 0 for a reminder.
	Rung int
}

// Steps returns a's reminders and rungs in the order they come due for a
// task that went to a person at human and has deadline (nil without one):
// by time, a reminder before a rung at the same time, rungs in their
// order. A step due at or after the deadline is left out: the deadline
// comes first, and the task leaves the desk.
func (a Alerts) Steps(human Timestamp, deadline *Timestamp) []AlertStep {
	steps := make([]AlertStep, 0, len(a.Reminders)+len(a.Escalation))
	add := func(w AlertWait, rung int) {
		if at, ok := w.at(human, deadline); ok && (deadline == nil || at < *deadline) {
			steps = append(steps, AlertStep{At: at, Rung: rung})
		}
	}
	for _, w := range a.Reminders {
		add(w, 0)
	}
	for i, r := range a.Escalation {
		add(r.After, i+1)
	}
	slices.SortStableFunc(steps, func(x, y AlertStep) int {
		if x.At != y.At {
			return int(x.At - y.At)
		}
		return x.Rung - y.Rung
	})
	return steps
}

// Earliest is the earliest time any step of a can come due for a task
// created at created, before it is known when it goes to a person: the
// store's first guess, which the sweep corrects. It is created itself
// when a waits a share of the deadline.
func (a Alerts) Earliest(created Timestamp) Timestamp {
	if a.NeedsDeadline() {
		return created
	}
	least := MaxAlertWait
	for _, w := range a.Reminders {
		least = min(least, w.After)
	}
	for _, r := range a.Escalation {
		least = min(least, r.After.After)
	}
	return created + Timestamp(least.Milliseconds())
}

// NextAlert decides, at now, for a task waiting for a person since human,
// with deadline (nil without one) and fired steps of a fired already, the
// step to fire now (nil when none is due) and when the step after it comes
// due (nil when none is left). A step is never fired before its time; one
// the deadline passes first is never fired.
func NextAlert(a Alerts, human Timestamp, deadline *Timestamp, fired int, now Timestamp) (fire *AlertStep, next *Timestamp) {
	steps := a.Steps(human, deadline)
	if fired >= len(steps) {
		return nil, nil
	}
	if s := steps[fired]; s.At > now {
		return nil, &s.At
	}
	fire = &steps[fired]
	if fired+1 < len(steps) {
		next = &steps[fired+1].At
	}
	return fire, next
}

// TaskEscalation is how far a task was escalated: the last rung it
// reached, and when.
type TaskEscalation struct {
	// Rung is the rung's number in the task's escalation, from 1.
	Rung        int       `json:"rung"`
	After       string    `json:"after"`
	To          string    `json:"to"`
	EscalatedAt Timestamp `json:"escalated_at"`
}

// Describe says whom the task was escalated to: "admins",
// "lead@example.com".
func (e *TaskEscalation) Describe() string { return Rung{To: e.To}.Describe() }

// EscalationOf returns the escalation of a task whose schedule is a and
// whose rung (from 1) was reached at at; nil for rung 0 or one a has not.
func EscalationOf(a Alerts, rung int, at Timestamp) *TaskEscalation {
	if rung < 1 || rung > len(a.Escalation) {
		return nil
	}
	r := a.Escalation[rung-1]
	return &TaskEscalation{Rung: rung, After: r.After.String(), To: r.To, EscalatedAt: at}
}

// AlertTargets returns the addresses a reminder (rung nil) or an
// escalation rung mails, of the account's members: a reminder each member
// who may review; a "role:" rung each member of the role; an "email:"
// rung its address when the address is a member's (memberAddress), and
// nobody otherwise: rungs and reminders never mail outside the account. A
// role's rung tells owners as admins, and passes a role nobody holds to
// the nearest one above it (roleTargets).
func AlertTargets(rung *Rung, members []*Membership, memberAddress bool) []string {
	var to []string
	if rung == nil {
		for _, m := range members {
			if Can(m.Role, ActionReview) {
				to = append(to, m.Email)
			}
		}
		return to
	}
	if role, ok := rung.Role(); ok {
		return roleTargets(role, members)
	}
	if email, ok := rung.Email(); ok && memberAddress {
		to = append(to, email)
	}
	return to
}

// roleTargets returns the addresses of the members a "role:" rung tells:
// those who hold the role, owners counting as admins (an owner may do all
// an admin may). When no member holds it (an account without reviewers,
// say), the members of the nearest role above it that someone holds, so a
// role's rung always tells someone: every account has an owner.
func roleTargets(role string, members []*Membership) []string {
	for i := slices.Index(Roles, role); i >= 0; i-- { // Roles go from the highest
		var to []string
		for _, m := range members {
			if m.Role == Roles[i] || (Roles[i] == RoleAdmin && m.Role == RoleOwner) {
				to = append(to, m.Email)
			}
		}
		if len(to) > 0 {
			return to
		}
	}
	return nil
}

// RungOutsideAccount is the EINVALID error of an "email:" rung (its
// number from 1) whose address belongs to no member of the account:
// rungs and reminders tell members only.
func RungOutsideAccount(rung int, email string) *Error {
	return FieldErrorf("escalation", "escalation: rung %d tells %s, who is not a member of this account. Rungs tell members only: invite them first, or name a role such as role:admin.",
		rung, email)
}

// Kinds of alert mail.
const (
	AlertReminder   = "reminder"
	AlertEscalation = "escalation"
)

// AlertMail is one mail of a reminder or a rung that came due: to one
// person or address, about one task.
type AlertMail struct {
	Kind                   string
	AccountID, AccountName string
	To                     string
	TaskID, Prompt         string
	// Waited is how long the task has waited for a person.
	Waited time.Duration
	// Escalation is the rung reached, for an escalation.
	Escalation *TaskEscalation
	// Outcome says what happens at the deadline, "" without one:
	// "approve at 14:32 UTC unless someone decides".
	Outcome string
}

// Subject is the mail's subject.
func (m AlertMail) Subject() string {
	if m.Kind == AlertEscalation {
		return "Escalated: a task in " + m.AccountName + " waits for a decision"
	}
	return "Reminder: a task in " + m.AccountName + " waits for review"
}

// Body is the mail's text, with the task's address on the reviewer site
// (queueURL/tasks/ID).
func (m AlertMail) Body(queueURL string) string {
	prompt := []rune(strings.Join(strings.Fields(m.Prompt), " "))
	if len(prompt) > 200 {
		prompt = append(prompt[:199], '…')
	}
	lines := []string{"Hello,", ""}
	if m.Kind == AlertEscalation && m.Escalation != nil {
		lines = append(lines, fmt.Sprintf("A task of %s has waited %s for a person and was escalated to %s (rung %d).",
			m.AccountName, m.Waited.Round(time.Minute), m.Escalation.Describe(), m.Escalation.Rung))
	} else {
		lines = append(lines, fmt.Sprintf("A task of %s has waited %s for a person.", m.AccountName, m.Waited.Round(time.Minute)))
	}
	lines = append(lines, "", "“"+string(prompt)+"”", "", QuotedFrom(m.AccountName), "", "Decide it: "+queueURL+"/tasks/"+m.TaskID, "")
	if m.Outcome != "" {
		lines = append(lines, "If nobody decides: "+m.Outcome+".", "")
	}
	return strings.Join(append(lines,
		"You get this because the task's policy asks for it. An owner or admin of the account can change its policies.",
		"", "— Arbiter"), "\r\n")
}

// AlertService fires the reminders and escalation rungs that came due.
type AlertService interface {
	// FireDueAlerts takes up to max tasks waiting for a person whose next
	// step may be due by the store's clock, and fires each step that is
	// (NextAlert), once however many workers call at once: a reminder
	// publishes task.reminded, a rung marks the task escalated and
	// publishes task.escalated; each asks again in Slack, and queues its
	// mail (a reminder to each member who may review, a rung to its
	// members) in the mail outbox. It returns how many tasks it took
	// (fewer than max: none is left).
	FireDueAlerts(ctx context.Context, max int) (int, error)
}

// ExpiryOutcome says what happens to t at its deadline if nobody decides
// it first, when its on-expiry outcome is not to expire: "approve at
// 2026-11-26 14:32 UTC"; "" otherwise.
func (t *Task) ExpiryOutcome() string {
	if t.DeadlineAt == nil || t.OnExpiry.IsExpire() {
		return ""
	}
	return t.OnExpiry.Describe() + " at " + t.DeadlineAt.Time().UTC().Format("2006-01-02 15:04 UTC")
}
