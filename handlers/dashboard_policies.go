package handlers

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardPolicies handles GET /settings/policies: the account's policies,
// with a confirmation after a delete (?deleted=TYPE).
func DashboardPolicies(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := policies.ListPolicies(r.Context(), arbiter.AccountIDFromContext(r.Context()))
		if err != nil {
			Error(w, r, err)
			return
		}
		v := dashboard.PoliciesView{Policies: list}
		if t := r.URL.Query().Get("deleted"); t != "" {
			v.Notice = "The policy of " + t + " is deleted; tasks of the type take the default policy from now on."
		}
		Render(w, r, http.StatusOK, dashboard.Policies(PageOf(r, "Policies", "settings"), v))
	})
}

// DashboardPolicy handles GET /settings/policy?task_type=T: the form of the
// account's policy of T, filled when it exists.
func DashboardPolicy(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		taskType := strings.TrimSpace(r.URL.Query().Get("task_type"))
		if taskType == "" {
			redirect(w, r, "/settings/policies")
			return
		}
		v := dashboard.PolicyView{TaskType: taskType}
		p, err := policies.FindPolicy(r.Context(), arbiter.AccountIDFromContext(r.Context()), taskType)
		switch {
		case err == nil:
			v = policyForm(p)
		case arbiter.ErrorCode(err) != arbiter.ENOTFOUND:
			Error(w, r, err)
			return
		}
		if r.URL.Query().Get("saved") == "1" {
			v.Notice = "Saved: tasks of this type created from now on take these values."
		}
		Render(w, r, http.StatusOK, dashboard.Policy(PageOf(r, "Policy", "settings"), v))
	})
}

// DashboardPolicySave handles POST /settings/policy: it replaces the
// account's policy of the form's task type with the form's values, audited,
// and shows it again; a bad value is shown with 400 and changes nothing.
func DashboardPolicySave(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The form could not be read."))
			return
		}
		f := r.PostForm
		v := dashboard.PolicyView{TaskType: strings.TrimSpace(f.Get("task_type")),
			Threshold: f.Get("confidence_threshold"), Deadline: f.Get("deadline"), AuditRate: f.Get("audit_rate"),
			OnExpiry: f.Get("on_expiry"), OnExpiryVerdict: f.Get("on_expiry_verdict"), AgentFloor: f.Get("agent_floor"),
			Fallback: f.Get("on_expiry_fallback"), FallbackVerdict: f.Get("on_expiry_fallback_verdict"),
			Notify: f.Get("notify"), Reviews: f.Get("reviews_required"), Consensus: f.Get("consensus"), Quorum: f.Get("quorum"),
			Veto: f.Get("veto"), ExcludeRequester: f.Get("exclude_requester") == "true", Tiebreak: f.Get("tiebreak"),
			Reminders: f.Get("reminders"), Escalation: f.Get("escalation"),
			TargetErrorRate: f.Get("target_error_rate"), TargetConfidence: f.Get("target_confidence"),
			Cascade: f.Get("cascade"), Thresholds: f.Get("thresholds"), Certified: f.Get("certified"), RequirePersonIf: f.Get("require_person_if")}
		accountID := arbiter.AccountIDFromContext(r.Context())
		p, err := readPolicyForm(v)
		if err == nil {
			_, err = policies.PutPolicy(r.Context(), accountID, p, ActorOf(r))
		}
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			_, findErr := policies.FindPolicy(r.Context(), accountID, v.TaskType)
			v.Exists = findErr == nil
			v.ErrorField, v.Error = policyFormError(v, err)
			Render(w, r, http.StatusBadRequest, dashboard.Policy(PageOf(r, "Policy", "settings"), v))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/policy?saved=1&task_type="+url.QueryEscape(p.TaskType))
	})
}

// DashboardPolicyDeleteConfirm handles GET /settings/policy/delete?task_type=T:
// it asks before the policy is deleted. A policy the account does not have
// leads back to the list.
func DashboardPolicyDeleteConfirm(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := policies.FindPolicy(r.Context(), arbiter.AccountIDFromContext(r.Context()), r.URL.Query().Get("task_type"))
		if arbiter.ErrorCode(err) == arbiter.ENOTFOUND || arbiter.ErrorCode(err) == arbiter.EINVALID {
			redirect(w, r, "/settings/policies")
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.PolicyDelete(PageOf(r, "Delete the policy of "+p.TaskType, "settings"), p.TaskType))
	})
}

// DashboardPolicyDelete handles POST /settings/policy/delete: it deletes
// the account's policy of the form's task type, audited.
func DashboardPolicyDelete(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The form could not be read."))
			return
		}
		taskType := r.PostForm.Get("task_type")
		if err := policies.DeletePolicy(r.Context(), arbiter.AccountIDFromContext(r.Context()), taskType, ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/policies?deleted="+url.QueryEscape(taskType))
	})
}

// policyForm is the form of a stored policy.
func policyForm(p *arbiter.Policy) dashboard.PolicyView {
	num := func(f *float64) string {
		if f == nil {
			return ""
		}
		return strconv.FormatFloat(*f, 'f', -1, 64)
	}
	v := dashboard.PolicyView{TaskType: p.TaskType, Exists: true, Threshold: num(p.ConfidenceThreshold), AuditRate: num(p.AuditRate),
		AgentFloor: num(p.OnExpiry.AgentFloor), OnExpiry: arbiter.OnExpiryExpire, Fallback: arbiter.OnExpiryExpire}
	if p.DeadlineSeconds != nil {
		v.Deadline = arbiter.AlertWait{After: time.Duration(*p.DeadlineSeconds) * time.Second}.String()
	}
	if p.OnExpiry.Outcome == arbiter.OnExpiryAgentVerdict {
		v.OnExpiry = arbiter.OnExpiryAgentVerdict
	} else if verdict, ok := arbiter.ExpiryVerdict(p.OnExpiry.Outcome); ok {
		v.OnExpiry, v.OnExpiryVerdict = "verdict", verdict
	}
	if verdict, ok := arbiter.ExpiryVerdict(p.OnExpiry.Fallback); ok {
		v.Fallback, v.FallbackVerdict = "verdict", verdict
	}
	v.Notify = strings.Join(p.Notify, " ")
	if r := p.Review; r != nil {
		v.Reviews, v.Consensus, v.Veto = strconv.Itoa(r.ReviewsRequired), r.Consensus, strings.Join(r.Veto, " ")
		v.ExcludeRequester, v.Tiebreak = r.ExcludeRequester, r.Tiebreak
		if r.Quorum != 0 {
			v.Quorum = strconv.Itoa(r.Quorum)
		}
	}
	var waits, rungs []string
	for _, w := range p.Alerts.Reminders {
		waits = append(waits, w.String())
	}
	for _, r := range p.Alerts.Escalation {
		rungs = append(rungs, r.After.String()+" "+r.To)
	}
	v.Reminders, v.Escalation = strings.Join(waits, ", "), strings.Join(rungs, ", ")
	if t := p.Target; t != nil {
		v.TargetErrorRate, v.TargetConfidence = num(&t.ErrorRate), num(&t.Confidence)
	}
	a := p.Agent
	v.Cascade, v.RequirePersonIf = strings.Join(a.Cascade, " "), a.RequirePersonIf
	var thresholds []string
	for _, name := range slices.Sorted(maps.Keys(a.Thresholds)) {
		thresholds = append(thresholds, name+" "+num(a.Thresholds[name]))
	}
	v.Thresholds = strings.Join(thresholds, ", ")
	if c := a.Certified; c != nil {
		v.Certified = num(&c.ErrorRate) + " " + num(&c.Confidence)
	}
	return v
}

// readPolicyForm reads the policy a form describes: an empty field is not
// set; a number that is not one is EINVALID naming it. The store validates
// the rest (Policy.Validate).
func readPolicyForm(v dashboard.PolicyView) (arbiter.Policy, error) {
	p := arbiter.Policy{TaskType: v.TaskType}
	for _, f := range []struct {
		name, value string
		out         **float64
	}{
		{"confidence_threshold", v.Threshold, &p.ConfidenceThreshold},
		{"audit_rate", v.AuditRate, &p.AuditRate},
		{"agent_floor", v.AgentFloor, &p.OnExpiry.AgentFloor},
	} {
		if s := strings.TrimSpace(f.value); s != "" {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return arbiter.Policy{}, arbiter.FieldErrorf(f.name, "%s must be a number from 0 to 1.", f.name)
			}
			*f.out = &n
		}
	}
	switch rate, confidence := strings.TrimSpace(v.TargetErrorRate), strings.TrimSpace(v.TargetConfidence); {
	case rate != "":
		t := arbiter.ErrorTarget{Confidence: arbiter.DefaultCertificationConfidence}
		var err error
		if t.ErrorRate, err = strconv.ParseFloat(rate, 64); err != nil {
			return arbiter.Policy{}, arbiter.FieldErrorf("target_error_rate", "target_error_rate must be a number between 0 and 1, such as 0.02.")
		}
		if confidence != "" {
			if t.Confidence, err = strconv.ParseFloat(confidence, 64); err != nil {
				return arbiter.Policy{}, arbiter.FieldErrorf("target_confidence", "target_confidence must be a number from 0.5 to below 1, such as 0.95.")
			}
		}
		p.Target = &t
	case confidence != "":
		return arbiter.Policy{}, arbiter.FieldErrorf("target_confidence", "target_confidence goes with target_error_rate; give target_error_rate too.")
	}
	if err := readAgentForm(&p, v); err != nil {
		return arbiter.Policy{}, err
	}
	if s := strings.TrimSpace(v.Deadline); s != "" {
		w, err := arbiter.ParseAlertWait("deadline", s)
		if err != nil || w.Percent > 0 || w.After%time.Second != 0 {
			return arbiter.Policy{}, arbiter.FieldErrorf("deadline", "Write the deadline as a duration such as 30m, 1h or 2d, from 1 minute to 30 days.")
		}
		n := int(w.After / time.Second)
		p.DeadlineSeconds = &n
	}
	var err error
	if p.OnExpiry.Outcome, err = outcomeField("on_expiry", v.OnExpiry, v.OnExpiryVerdict, true); err != nil {
		return arbiter.Policy{}, err
	}
	if p.OnExpiry.Outcome == arbiter.OnExpiryAgentVerdict {
		if p.OnExpiry.AgentFloor == nil {
			return arbiter.Policy{}, arbiter.FieldErrorf("agent_floor", "Give the agent's least confidence, a number from 0 to 1: below it, the agent's verdict does not decide.")
		}
		if p.OnExpiry.Fallback, err = outcomeField("on_expiry_fallback", v.Fallback, v.FallbackVerdict, false); err != nil {
			return arbiter.Policy{}, err
		}
	}
	if p.OnExpiry.Outcome == arbiter.OnExpiryExpire && p.OnExpiry.Fallback == "" {
		p.OnExpiry.Outcome = ""
	}
	if p.OnExpiry.Outcome != "" && p.DeadlineSeconds == nil {
		return arbiter.Policy{}, arbiter.FieldErrorf("deadline", "Deciding at the deadline needs a deadline: give one, such as 1h.")
	}
	if targets := listField(v.Notify); len(targets) > 0 {
		var err error
		if p.Notify, err = arbiter.ParseNotify(targets); err != nil {
			return arbiter.Policy{}, err
		}
	}
	review := arbiter.ReviewRequirement{Consensus: strings.TrimSpace(v.Consensus), ExcludeRequester: v.ExcludeRequester,
		Tiebreak: strings.TrimSpace(v.Tiebreak)}
	for _, f := range []struct {
		name, value string
		out         *int
	}{
		{"reviews_required", v.Reviews, &review.ReviewsRequired},
		{"quorum", v.Quorum, &review.Quorum},
	} {
		if s := strings.TrimSpace(f.value); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return arbiter.Policy{}, arbiter.FieldErrorf(f.name, "%s must be a whole number from 1 to %d.", f.name, arbiter.MaxReviewsRequired)
			}
			*f.out = n
		}
	}
	for _, v := range listField(v.Veto) {
		review.Veto = append(review.Veto, *v)
	}
	if review.ReviewsRequired != 0 || review.Consensus != "" || review.Quorum != 0 || len(review.Veto) > 0 || review.ExcludeRequester || review.Tiebreak != "" {
		r, err := review.ForPolicy()
		if err != nil {
			return arbiter.Policy{}, err
		} else if !r.IsDefault() {
			p.Review = &r
		}
	}
	// Reminders are waits apart; rungs, "wait target" apart by commas.
	var waits []*string
	for _, w := range strings.FieldsFunc(v.Reminders, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		waits = append(waits, &w)
	}
	var rungs []*arbiter.RungRequest
	for _, rung := range strings.Split(v.Escalation, ",") {
		if f := strings.Fields(rung); len(f) == 2 {
			rungs = append(rungs, &arbiter.RungRequest{After: &f[0], To: &f[1]})
		} else if len(f) > 0 {
			return arbiter.Policy{}, arbiter.FieldErrorf("escalation", "Write each rung as a wait and a target, such as 30m role:admin, apart by commas.")
		}
	}
	if p.Alerts.Reminders, err = arbiter.ParseReminders(waits); err != nil {
		return arbiter.Policy{}, err
	}
	if p.Alerts.Escalation, err = arbiter.ParseEscalation(rungs); err != nil {
		return arbiter.Policy{}, err
	}
	return p, nil
}

// outcomeField reads an outcome the form chooses ("expire", "verdict"
// with its verdict, or, when agent is true, "agent_verdict") as the
// policy writes it ("verdict:reject"); field names the choice.
func outcomeField(field, choice, verdict string, agent bool) (string, error) {
	switch choice = strings.TrimSpace(choice); {
	case choice == "" || choice == arbiter.OnExpiryExpire:
		return arbiter.OnExpiryExpire, nil
	case choice == arbiter.OnExpiryAgentVerdict && agent:
		return choice, nil
	case choice == "verdict":
		if verdict = strings.TrimSpace(verdict); verdict == "" {
			return "", arbiter.FieldErrorf(field+"_verdict", "Give the verdict that decides, one of the task's allowed verdicts such as reject.")
		}
		return "verdict:" + verdict, nil
	}
	return "", arbiter.FieldErrorf(field, "Choose what happens from the list.")
}

// policyFormFields are the fields of the policy form, by the name the
// store's errors give them, and the words a person reads them by.
var policyFormFields = []struct{ field, words string }{
	{"on_expiry_fallback", "what happens below the agent's least confidence"},
	{"on_expiry agent_verdict", "taking the agent's verdict"},
	{"on_expiry", "what happens at the deadline"},
	{"agent_floor", "the agent's least confidence"},
	{"confidence_threshold", "the confidence threshold"},
	{"deadline_seconds", "a deadline"},
	{"audit_rate", "the audit rate"},
	{"reviews_required", "the reviews required"},
	{"allowed_verdicts", "the allowed verdicts"},
	{"exclude_requester", "keeping the requester from voting"},
	{"requested_by", "the requester's address"},
	{"target_error_rate", "the target error rate"},
	{"target_confidence", "the target's confidence"},
	{"require_person_if", "the condition for a person"},
}

// policyFormError is what the form says of err: the field it shows beside
// (the form's name for the store's field, "" for none) and the message in
// the form's words rather than the API's.
func policyFormError(v dashboard.PolicyView, err error) (field, message string) {
	field, message = arbiter.ErrorField(err), arbiter.ErrorMessage(err)
	switch field {
	case "deadline_seconds":
		field = "deadline"
	case "on_expiry", "on_expiry_fallback":
		if (field == "on_expiry" && v.OnExpiry == "verdict") || (field == "on_expiry_fallback" && v.Fallback == "verdict") {
			field += "_verdict"
		}
	case "requested_by":
		field = "exclude_requester"
	case "task_type":
		field = ""
	}
	for _, f := range policyFormFields {
		message = strings.ReplaceAll(message, f.field, f.words)
	}
	if r, size := utf8.DecodeRuneInString(message); size > 0 {
		message = string(unicode.ToUpper(r)) + message[size:]
	}
	return field, message
}

// listField splits a form's list, space- or comma-separated.
func listField(s string) []*string {
	var out []*string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		out = append(out, &f)
	}
	return out
}

// readAgentForm reads the form's cascade fields into p.Agent: verifier
// names, "name threshold" pairs, "target confidence" and an expression;
// a number that is not one is EINVALID naming its field, the rest
// Policy.Validate checks.
func readAgentForm(p *arbiter.Policy, v dashboard.PolicyView) error {
	p.Agent.Cascade = strings.Fields(v.Cascade)
	for _, pair := range strings.Split(v.Thresholds, ",") {
		fields := strings.Fields(pair)
		if len(fields) == 0 {
			continue
		}
		t, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if len(fields) != 2 || err != nil {
			return arbiter.FieldErrorf("thresholds", "thresholds are pairs of a verifier and a number, such as small 0.97, large 0.9.")
		}
		if p.Agent.Thresholds == nil {
			p.Agent.Thresholds = map[string]*float64{}
		}
		p.Agent.Thresholds[fields[0]] = &t
	}
	if fields := strings.Fields(v.Certified); len(fields) > 0 {
		target := arbiter.ErrorTarget{Confidence: arbiter.DefaultCertificationConfidence}
		var err error
		if target.ErrorRate, err = strconv.ParseFloat(fields[0], 64); err != nil || len(fields) > 2 {
			return arbiter.FieldErrorf("certified", "certified is a target error rate and, if you like, its confidence, such as 0.05 0.95.")
		}
		if len(fields) == 2 {
			if target.Confidence, err = strconv.ParseFloat(fields[1], 64); err != nil {
				return arbiter.FieldErrorf("certified", "certified is a target error rate and, if you like, its confidence, such as 0.05 0.95.")
			}
		}
		p.Agent.Certified = &target
	}
	p.Agent.RequirePersonIf = strings.TrimSpace(v.RequirePersonIf)
	return nil
}
