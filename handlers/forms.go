package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/jcs"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// The form readers: each reads one posted form from r.PostForm (which the
// pages' middleware has parsed and held to valid UTF-8) into what its
// handler needs, and refuses what no handler may take with the sentence
// the page shows, an EINVALID error. Query strings are read where they are
// used.

// errNoEventTypes refuses an endpoint form with no event type ticked.
var errNoEventTypes = arbiter.Errorf(arbiter.EINVALID, "Choose at least one event type.")

// endpointForm reads an endpoint's form: its URL, description and event
// types, or errNoEventTypes when none is ticked.
func endpointForm(r *http.Request) (arbiter.WebhookEndpointInput, error) {
	in := arbiter.WebhookEndpointInput{
		URL: r.PostFormValue("url"), Description: r.PostFormValue("description"), EventTypes: r.PostForm["event_types"],
	}
	if len(in.EventTypes) == 0 {
		return in, errNoEventTypes
	}
	return in, nil
}

// minutesOf reads a whole number of minutes, from 1 to a day's; refused
// is the answer for anything else.
func minutesOf(typed string, refused error) (time.Duration, error) {
	n, err := strconv.Atoi(strings.TrimSpace(typed))
	if err != nil || n < 1 || n > 24*60 {
		return 0, refused
	}
	return time.Duration(n) * time.Minute, nil
}

// errNotifyMinutes refuses a wait before mailing reviewers that is not a
// number of minutes.
var errNotifyMinutes = arbiter.CheckNotifyAfter(0)

// errReservationMinutes refuses a reservation length that is not a number
// of minutes the store may hold.
var errReservationMinutes = arbiter.Errorf(arbiter.EINVALID, "A reservation lasts from %d to %d whole minutes.",
	int(arbiter.MinReservation.Minutes()), int(arbiter.MaxReservation.Minutes()))

// settingsForm is the settings page's form, as typed: the reservation
// length and the wait before mailing reviewers ("" for never), in minutes.
type settingsForm struct {
	ReservationMinutes, NotifyMinutes, GoldPercent string
}

// readSettingsForm reads the settings page's form.
func readSettingsForm(r *http.Request) settingsForm {
	return settingsForm{ReservationMinutes: r.PostFormValue("reservation_minutes"), NotifyMinutes: r.PostFormValue("notify_minutes"),
		GoldPercent: r.PostFormValue("gold_percent")}
}

// durations returns the reservation length and the wait before mailing
// reviewers (nil: never) the form asks for, both checked, so that neither
// is saved when the other is refused. Returns EINVALID.
func (f settingsForm) durations() (reserve time.Duration, notify *time.Duration, err error) {
	if reserve, err = minutesOf(f.ReservationMinutes, errReservationMinutes); err == nil {
		err = arbiter.CheckReservation(reserve)
	}
	if err != nil {
		return 0, nil, inFormField("reservation_minutes", err)
	}
	if strings.TrimSpace(f.NotifyMinutes) != "" {
		n, err := minutesOf(f.NotifyMinutes, errNotifyMinutes)
		if err == nil {
			err = arbiter.CheckNotifyAfter(n)
		}
		if err != nil {
			return 0, nil, inFormField("notify_minutes", err)
		}
		notify = &n
	}
	return reserve, notify, nil
}

// inFormField returns err, an EINVALID error, as one about the form's
// field named name, so the page shows it beside that field.
func inFormField(name string, err error) error {
	if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != "" {
		return err
	}
	return arbiter.FieldErrorf(name, "%s", arbiter.ErrorMessage(err))
}

// auditRateForm reads the audit rate page's form: the rate as typed, a
// percentage with or without its sign, and the share it is.
func auditRateForm(r *http.Request) (typed string, rate float64, err error) {
	typed = r.PostForm.Get("audit_rate")
	if strings.HasSuffix(typed, "%") {
		rate, err = arbiter.ParseAuditRate(typed)
	} else {
		rate, err = arbiter.ParseAuditRate(typed + "%")
	}
	return typed, rate, err
}

// errResendSince refuses a resend-failed form whose time cannot be read.
var errResendSince = arbiter.Errorf(arbiter.EINVALID, "Give the time to resend from as a date and time, such as 2026-01-31T09:00 (UTC).")

// resendSinceForm reads the time a resend-failed form gives, in UTC, as a
// datetime-local input sends it (with or without seconds), or
// errResendSince.
func resendSinceForm(r *http.Request) (time.Time, error) {
	raw := strings.TrimSpace(r.PostFormValue("since"))
	if since, err := time.Parse(dashboard.SinceLayout, raw); err == nil {
		return since, nil
	}
	if since, err := time.Parse(dashboard.SinceLayout+":05", raw); err == nil {
		return since, nil
	}
	return time.Time{}, errResendSince
}

// verdictForm reads the verdict and the optional rationale of a posted
// verdict form.
func verdictForm(r *http.Request) (verdict, rationale string, err error) {
	if err := r.ParseForm(); err != nil {
		return "", "", arbiter.Errorf(arbiter.EINVALID, "The form could not be read.")
	}
	verdict, rationale = r.PostForm.Get("verdict"), r.PostForm.Get("rationale")
	if verdict == "" {
		return "", "", arbiter.Errorf(arbiter.EINVALID, "Pick a verdict.")
	}
	return verdict, rationale, nil
}

// editsAction reports whether a verdict form carries an edit of the
// task's action: the generated inputs (arg.<member>) or, from a person's
// script, args, the whole arguments as JSON.
func editsAction(r *http.Request) bool {
	if strings.TrimSpace(r.PostForm.Get("args")) != "" {
		return true
	}
	for k := range r.PostForm {
		if strings.HasPrefix(k, "arg.") {
			return true
		}
	}
	return false
}

// actionEditForm reads the edit of t's action a verdict form carries: the
// args to approve instead, nil when the edit changes nothing or comes
// with a verdict that allows none (the action then stays as proposed);
// and what the reviewer typed, by member, to show again after a refusal.
// args (JSON) is taken as it is, for the decision to check; the inputs
// are read by their members' kinds, and a value not of its kind is
// EINVALID naming the member.
func actionEditForm(r *http.Request, t *arbiter.Task, verdict string) (json.RawMessage, map[string]string, error) {
	cur, ok := t.CurrentAction()
	if raw := strings.TrimSpace(r.PostForm.Get("args")); raw != "" {
		return json.RawMessage(raw), nil, nil
	}
	if !ok {
		return nil, nil, nil
	}
	typed := map[string]string{}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(cur.Args, &members); err != nil {
		return nil, nil, err
	}
	changed := false
	fields := t.Action.EditableFields(cur)
	for _, f := range fields {
		text, sent := r.PostForm["arg."+f.Name]
		if !sent {
			continue
		}
		typed[f.Name] = text[0]
		value, err := f.Parse(text[0])
		if err != nil {
			return nil, typed, err
		}
		changed = changed || !sameJSON(members[f.Name], value)
		members[f.Name] = value
	}
	if !changed || !slices.Contains(t.EditVerdicts, verdict) {
		return nil, typed, nil
	}
	args, err := json.Marshal(members)
	return args, typed, err
}

// sameJSON reports whether two JSON values are the same data: equal in
// their RFC 8785 form (80 and 80.0 are; "80" and 80 are not).
func sameJSON(a, b json.RawMessage) bool {
	ca, errA := jcs.Canonicalize(a)
	cb, errB := jcs.Canonicalize(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}
