package handlers

import (
	"errors"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// DecisionLinkShow handles GET /review/links/{token}: the task and the
// verdict to confirm. It decides nothing (mail scanners open links); a
// link that cannot decide answers a page saying why.
func DecisionLinkShow(links arbiter.DecisionLinkService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := decisionLinkView(r)
		l, t, err := links.FindDecisionLink(r.Context(), r.PathValue("token"))
		if err != nil {
			decisionLinkRefused(w, r, v, err)
			return
		}
		if s := arbiter.SessionFromContext(r.Context()); s != nil && s.PersonID != l.PersonID {
			decisionLinkRefused(w, r, v, arbiter.ErrDecisionLinkOther)
			return
		}
		v.Prompt, v.Verdict = t.Prompt, l.Verdict
		if cur, ok := t.CurrentAction(); ok {
			v.ToolCall = &cur
			if cur.Digest != l.ActionDigest {
				v.Outcome = arbiter.ActionChangedError(cur).Message
			}
		}
		if !t.InReviewQueue() {
			v.Outcome = "This task no longer waits for a decision."
		}
		Render(w, r, http.StatusOK, review.DecisionLink(PageOf(r, "Confirm your decision", ""), v))
	})
}

// DecisionLinkUse handles POST /review/links/{token}, the confirm page's
// form: the token is the credential (the form is same-origin, as every
// page form). It decides once; a used, expired, unknown or someone
// else's link answers a page saying why, and so does a task decided or
// expired since.
func DecisionLinkUse(links arbiter.DecisionLinkService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := decisionLinkView(r)
		personID := ""
		if s := arbiter.SessionFromContext(r.Context()); s != nil {
			personID = s.PersonID
		}
		t, err := links.UseDecisionLink(r.Context(), r.PathValue("token"), personID, ClientOf(r))
		switch {
		case err == nil:
			v.Decided = true
			// The reviewer's own answer: a gold task's final verdict is
			// not theirs to see.
			if verdict := t.OutcomeForReviewers(); verdict != nil {
				v.Verdict = *verdict
			}
			Render(w, r, http.StatusOK, review.DecisionLink(PageOf(r, "Decided", ""), v))
		case isDecisionLinkError(err):
			decisionLinkRefused(w, r, v, err)
		case arbiter.ErrorCode(err) == arbiter.ECONFLICT:
			v.Outcome = arbiter.ErrorMessage(err)
			Render(w, r, http.StatusConflict, review.DecisionLink(PageOf(r, "Not decided", ""), v))
		default:
			Error(w, r, err)
		}
	})
}

func decisionLinkView(r *http.Request) review.DecisionLinkView {
	return review.DecisionLinkView{Action: "/review/links/" + r.PathValue("token"), QueueURL: "/review/queue"}
}

func isDecisionLinkError(err error) bool {
	for _, e := range []error{arbiter.ErrDecisionLinkUnknown, arbiter.ErrDecisionLinkUsed, arbiter.ErrDecisionLinkExpired,
		arbiter.ErrDecisionLinkOther, arbiter.ErrDecisionLinkNotMember} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// decisionLinkRefused answers the page of a link that cannot decide:
// 404 unknown, 410 used or expired, 403 someone else's.
func decisionLinkRefused(w http.ResponseWriter, r *http.Request, v review.DecisionLinkView, err error) {
	if !isDecisionLinkError(err) {
		Error(w, r, err)
		return
	}
	status := http.StatusGone
	switch {
	case errors.Is(err, arbiter.ErrDecisionLinkUnknown):
		status = http.StatusNotFound
	case errors.Is(err, arbiter.ErrDecisionLinkOther):
		status = http.StatusForbidden
	}
	v.Error = arbiter.ErrorMessage(err)
	Render(w, r, status, review.DecisionLink(PageOf(r, "Link", ""), v))
}
