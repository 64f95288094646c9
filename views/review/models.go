// Package review holds the reviewer site's pages: the human queue, the task
// on the reviewer's desk, and the anonymous demo.
package review

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/components"
)

// QueueView is the account's queue of tasks waiting for a human.
type QueueView struct {
	Tasks  []*arbiter.Task
	Total  int
	Notice string // a message after the last decision
	// Welcome names the account a reviewer has just joined, who is
	// welcomed; "" otherwise.
	Welcome string
	// Self is the signed-in reviewer: tasks someone else holds are marked
	// with who, and the first free one is where j leads.
	Self string
	// View is the filters and order of the address, which the list's
	// polling keeps.
	View arbiter.QueueView
	Now  time.Time
}

// Subtitle says what the queue lists and in which order, as the list
// shows it: tasks waiting for a person (the verifier's doubts, gold tasks
// that skipped it, blind audits when there are some), escalated first or
// by the nearest deadline.
func (v QueueView) Subtitle() string {
	what := "Tasks waiting for a person's verdict"
	for _, t := range v.Tasks {
		if t.AuditWaiting() {
			what += ", blind audits of the verifier's confident answers among them"
			break
		}
	}
	order := "escalated ones first, then the oldest"
	if v.View.Order == arbiter.QueueByDeadline {
		order = "the nearest deadline first, tasks without one last"
	}
	return what + "; " + order + ". Open one to decide it; the list updates by itself."
}

// HeldByOther reports whether someone other than the signed-in reviewer
// holds t.
func (v QueueView) HeldByOther(t *arbiter.Task) bool {
	return t.Reservation.HeldByOther(v.Self, arbiter.TimestampOf(v.Now))
}

// FirstFree returns the index of the first task nobody else holds, or -1.
func (v QueueView) FirstFree() int {
	for i, t := range v.Tasks {
		if !v.HeldByOther(t) {
			return i
		}
	}
	return -1
}

// ExpiresLine says when a task whose deadline only expires it does so:
// "00:10 UTC, in 9 minutes", with the date when that is not today (UTC),
// "2026-11-27 00:10 UTC, in 2 days". It is "" for a task without a
// deadline, and for one its deadline decides, which ExpiryOutcome tells.
func ExpiresLine(t *arbiter.Task, now time.Time) string {
	if t.DeadlineAt == nil || !t.OnExpiry.IsExpire() {
		return ""
	}
	at := t.DeadlineAt.Time().UTC()
	when := ClockTime(*t.DeadlineAt)
	if y, m, d := now.UTC().Date(); at.Year() != y || at.Month() != m || at.Day() != d {
		when = at.Format("2006-01-02 15:04") + " UTC"
	}
	if !at.After(now) {
		return when + ", now"
	}
	return when + ", " + components.Relative(*t.DeadlineAt, now)
}

// ClockTime writes an instant as the hour and minute, in UTC, for "until
// 14:32".
func ClockTime(ts arbiter.Timestamp) string {
	return ts.Time().UTC().Format("15:04") + " UTC"
}

// TaskView is one task on the reviewer's desk, a real one or a demo one.
type TaskView struct {
	Task *arbiter.Task
	// Action is where the verdict form posts.
	Action string
	// Query is the view of the queue the reviewer works in, as the query
	// its addresses carry (arbiter.QueueView.Query); "" for the whole
	// queue. The forms post with it, and "back to the queue" returns to it.
	Query string
	// Prev and Next are the neighbouring tasks' pages, in the view; "" at
	// the ends.
	Prev, Next string
	// Position counts from 1 within Total tasks of the queue; 0 when the
	// task is not in the queue (decided already, say).
	Position, Total int
	// Notice reports the previous decision; Error why this one failed.
	Notice, Error string
	// Reservation is who holds the task, when someone does; Mine says
	// it is the signed-in reviewer, whose page extends it.
	Reservation *arbiter.Reservation
	Mine        bool
	// Voted is what the task waits for when the signed-in reviewer has
	// voted on it already: the desk then shows their vote, not the
	// verdicts. Nil otherwise.
	Voted *arbiter.VoterWait
	// Demo marks the anonymous demo, with how many verdicts this visitor
	// has given.
	Demo     bool
	DemoDone int
	Now      time.Time
	// EditValues are what the reviewer typed in the action's edit form,
	// by member, shown again after a refusal; EditOpen opens the form.
	EditValues map[string]string
	EditOpen   bool
}

// WelcomeView is the reviewer site for a visitor who is not signed in.
type WelcomeView struct {
	SignInURL string
	DemoTasks int
}

// DemoDoneView ends the demo: how many verdicts the visitor gave on how
// many tasks, and the confirmation of the last one.
type DemoDoneView struct {
	Done, Total int
	Notice      string
}

// How much of a prompt the desk shows before "show more".
const (
	promptShownChars = 1200
	promptShownLines = 16
)

// queuePrompt is the beginning of a prompt, as much as a queue row's two
// lines can show, so a long queue of long prompts stays a small page.
func queuePrompt(prompt string) string {
	if shown, rest := cutText(prompt, 300, 3); rest != "" {
		return shown + "…"
	}
	return prompt
}

// verdictsWord is "verdict" or "verdicts", to follow the count n.
func verdictsWord(n int) string {
	if n == 1 {
		return "verdict"
	}
	return "verdicts"
}

// shortcut is the key that picks the i-th verdict, "" past the ninth.
func shortcut(i int) string {
	if i >= 9 {
		return ""
	}
	return strconv.Itoa(i + 1)
}

// AttemptOutcome is what an attempt came to: the verdict, with the
// verifier's confidence ("approve (95%)"); a person's verdict has no
// confidence to show, and an answer without a verdict says so alone.
func AttemptOutcome(a arbiter.Attempt) string {
	if a.Verdict == nil || *a.Verdict == "" {
		return "no decision"
	}
	if a.Tier == arbiter.TierHuman || a.Confidence == nil {
		return *a.Verdict
	}
	return *a.Verdict + " (" + percent(a.Confidence) + ")"
}

// VotedLine tells a reviewer who has voted what the task waits for: "You
// voted "approve". Waiting for 1 more vote."
func (v TaskView) VotedLine() string {
	w := v.Voted
	if w == nil {
		return ""
	}
	line := "You voted " + strconv.Quote(w.Verdict) + ". "
	switch {
	case w.State == arbiter.VotesPending:
		return line + "Waiting for " + plural(w.More, "more vote") + "."
	case w.Tiebreaker:
		return line + "The votes are split: an owner or admin casts the deciding vote."
	}
	return line + "The votes are split: the task waits for its deadline."
}

// Heading names the task on its desk, for the page's heading and title:
// its place in the queue and the beginning of its prompt, so each desk
// page reads differently.
func (v TaskView) Heading() string {
	prompt := v.Task.Prompt
	if shown, rest := cutText(prompt, 60, 1); rest != "" {
		prompt = strings.TrimSpace(shown) + "…"
	}
	if v.Position > 0 {
		return "Task " + queueCount(v.Position) + " of " + queueCount(v.Total) + ": " + prompt
	}
	return "Task: " + prompt
}

// percent writes a confidence as a percentage.
func percent(c *float64) string {
	if c == nil {
		return "–"
	}
	return strconv.Itoa(int(*c*100+0.5)) + "%"
}

func deref(s *string, none string) string {
	if s == nil || *s == "" {
		return none
	}
	return *s
}

func itoa(n int) string { return strconv.Itoa(n) }

// queueCount shows a count of the human queue, which stops past
// arbiter.QueueCountCap: "1000+" beyond it.
func queueCount(n int) string {
	if n > arbiter.QueueCountCap {
		return strconv.Itoa(arbiter.QueueCountCap) + "+"
	}
	return strconv.Itoa(n)
}

// Query returns the view as the query string of the queue's address, "" for
// the default view.
func (v QueueView) Query() string {
	q := url.Values{}
	for k, val := range map[string]string{"task_type": v.View.TaskType, "source": v.View.Source, "touchpoint": v.View.Touchpoint} {
		if val != "" {
			q.Set(k, val)
		}
	}
	if v.View.Order == arbiter.QueueByDeadline {
		q.Set("order", v.View.Order)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// StatsView is the desk's stats page.
type StatsView struct {
	Stats arbiter.DeskStats
	// Windows are the windows offered, by name.
	Windows []string
	// Self is the signed-in reviewer's e-mail, whose line is marked.
	Self string
	// Everyone says every member's line is shown, with the accuracy on
	// gold tasks; otherwise only Self's, without it.
	Everyone bool
	// Agreement is the reviewers' agreement over the window's tasks that
	// asked several votes; nil when not read.
	Agreement *arbiter.AgreementReport
}

// Share writes a share as a percentage, "—" for none.
func Share(f *float64) string {
	if f == nil {
		return "—"
	}
	return strconv.FormatFloat(*f*100, 'f', 0, 64) + "%"
}

// Coefficient writes an agreement coefficient to two places, "—" for none.
func Coefficient(f *float64) string {
	if f == nil {
		return "—"
	}
	return strconv.FormatFloat(*f, 'f', 2, 64)
}

// Duration writes a duration for the stats: "—" for none, else the two
// largest units ("3m 20s", "2h 5m", "4d 3h").
func Duration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	d = d.Round(time.Second)
	days, hours, minutes, seconds := int(d/(24*time.Hour)), int(d/time.Hour)%24, int(d/time.Minute)%60, int(d/time.Second)%60
	switch {
	case days > 0:
		return strconv.Itoa(days) + "d " + strconv.Itoa(hours) + "h"
	case hours > 0:
		return strconv.Itoa(hours) + "h " + strconv.Itoa(minutes) + "m"
	case minutes > 0:
		return strconv.Itoa(minutes) + "m " + strconv.Itoa(seconds) + "s"
	}
	return strconv.Itoa(seconds) + "s"
}

// Rate writes a disagreement rate as a percentage, or "—" with nothing to
// compare.
func Rate(s arbiter.ReviewerStats) string {
	r := s.DisagreementRate()
	if r < 0 {
		return "—"
	}
	return strconv.Itoa(int(r*100+0.5)) + "% (" + strconv.Itoa(s.Disagreements) + " of " + strconv.Itoa(s.Compared) + ")"
}

// goldLine writes a reviewer's accuracy on gold tasks: "3 of 4 (75%)",
// "—" when they answered none.
func goldLine(r arbiter.ReviewerAgreement) string {
	if r.GoldAnswered == 0 {
		return "—"
	}
	return strconv.Itoa(r.GoldCorrect) + " of " + strconv.Itoa(r.GoldAnswered) + " (" + Share(r.GoldAccuracy) + ")"
}

// shownAction is the action the desk shows for t: the approved one once
// decided, else the one in force; false without an action.
func shownAction(t *arbiter.Task) (arbiter.ApprovedAction, bool) {
	if t.ApprovedAction != nil {
		return *t.ApprovedAction, true
	}
	return t.CurrentAction()
}

// editedNote says what an edit of the action changed: the members, and
// that votes restarted when the task still waits for several.
func editedNote(t *arbiter.Task, a arbiter.ApprovedAction) string {
	var members []string
	for _, op := range a.Patch {
		members = append(members, strings.TrimPrefix(op.Path, "/"))
	}
	note := "Edited by a reviewer: " + strings.Join(members, ", ") + " changed (proposed digest " + arbiter.ShortDigest(a.ProposedDigest) + ")."
	if t.ApprovedAction == nil && t.VotesOpen() {
		note += " The votes restarted on the edited action."
	}
	return note
}

// EditFields returns the editable members of the task's action a
// reviewer may change on this desk: none on a blind audit, a decided task
// or a task without edit verdicts.
func (v TaskView) EditFields() []arbiter.EditableField {
	t := v.Task
	if t.Action == nil || len(t.EditVerdicts) == 0 || t.AuditWaiting() || !t.InReviewQueue() || v.Demo {
		return nil
	}
	cur, _ := t.CurrentAction()
	return t.Action.EditableFields(cur)
}

// EditValue is what the edit form shows for a member: what the reviewer
// typed, after a refusal; else its value in force.
func (v TaskView) EditValue(f arbiter.EditableField) string {
	if s, ok := v.EditValues[f.Name]; ok {
		return s
	}
	var s string
	if f.Kind != arbiter.EditJSON && json.Unmarshal(f.Value, &s) == nil {
		return s
	}
	return string(f.Value)
}

// EditNote says with which verdicts the edit applies.
func (v TaskView) EditNote() string {
	verdicts := make([]string, len(v.Task.EditVerdicts))
	for i, e := range v.Task.EditVerdicts {
		verdicts[i] = "“" + e + "”"
	}
	return "Your changes apply when you decide " + strings.Join(verdicts, " or ") +
		"; with another verdict the action stays as proposed. Values you leave as they are are no edit."
}

// editKind names an input's kind for its label.
func editKind(f arbiter.EditableField) string {
	switch f.Kind {
	case arbiter.EditJSON:
		return "(JSON)"
	case arbiter.EditEnum:
		return "(one of the choices)"
	}
	return "(" + f.Kind + ")"
}

// editChoices are a choice input's options.
func editChoices(f arbiter.EditableField) []string {
	if f.Kind == arbiter.EditBoolean {
		return []string{"true", "false"}
	}
	return f.Enum
}

// numericMode is a number input's keyboard on a phone.
func numericMode(f arbiter.EditableField) string {
	if f.Kind == arbiter.EditInteger {
		return "numeric"
	}
	return "decimal"
}

// Question is the bulk page's question: how many tasks, which verdict.
func (v BulkView) Question() string {
	return fmt.Sprintf("Decide %s “%s”?", plural(len(v.Marks), "task"), v.Verdict)
}

// Confirm is the bulk page's button.
func (v BulkView) Confirm() string {
	return fmt.Sprintf("Decide %s “%s”", plural(len(v.Marks), "task"), v.Verdict)
}

// BulkVerdicts are the verdicts the listed tasks that may be decided
// together allow, in the order they first appear; none without such a
// task.
func (v QueueView) BulkVerdicts() []string {
	var out []string
	for _, t := range v.Tasks {
		if !arbiter.BulkEligible(t) {
			continue
		}
		for _, verdict := range t.AllowedVerdicts {
			if !slices.Contains(out, verdict) {
				out = append(out, verdict)
			}
		}
	}
	return out
}
