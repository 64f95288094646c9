package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// InvitationAccept handles POST /invitations/accept: the signed-in person
// joins the invitation's account, when an address they signed in with is
// the invited one, and works in it from now on.
func InvitationAccept(members arbiter.MemberService, sessions SessionKeeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		m, err := members.AcceptInvitation(r.Context(), r.PostFormValue("token"), s.PersonID, ClientOf(r))
		if err != nil {
			Error(w, r, err)
			return
		}
		if err := sessions.SwitchAccount(r, m.AccountID); err != nil {
			Error(w, r, err)
			return
		}
		home := homeOf(r, m.Role)
		if home == SiteFromContext(r.Context()).ReviewHome() {
			home += "?" + welcomeParam // the queue welcomes the new reviewer
		}
		redirect(w, r, home)
	})
}
