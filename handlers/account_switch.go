package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// AccountSwitch handles POST /account on the dashboard and POST
// /review/account on the reviewer site: the session works in the chosen
// account from now on. An account the person is not a member of is not
// found.
func AccountSwitch(sessions SessionKeeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accountID := r.PostFormValue("account_id")
		if err := sessions.SwitchAccount(r, accountID); err != nil {
			Error(w, r, err)
			return
		}
		for _, m := range arbiter.SessionFromContext(r.Context()).Accounts {
			if m.AccountID == accountID {
				redirect(w, r, homeOf(r, m.Role))
				return
			}
		}
		redirect(w, r, "/")
	})
}

// homeOf returns where a member with the role starts: the dashboard's
// overview, or the review queue for a role that may not see the overview.
func homeOf(r *http.Request, role string) string {
	site := SiteFromContext(r.Context())
	if arbiter.Can(role, arbiter.ActionViewOverview) {
		return site.AppLink("/")
	}
	return site.ReviewHome()
}
