package handlers

import (
	"net/http"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// joinedNotice tells a person who accepted an invitation which account
// they joined, in which role, and, when they had others, that they work in
// it now and where the others are.
func joinedNotice(m *arbiter.Membership, hadOthers bool) string {
	article := "a "
	if m.Role == arbiter.RoleAdmin || m.Role == arbiter.RoleOwner {
		article = "an "
	}
	joined := "You joined " + m.AccountName + " as " + article + strings.ToLower(arbiter.RoleLabel(m.Role))
	if !hadOthers {
		return joined + "."
	}
	return joined + " and switched to it: what you see now is its. Your other accounts are in the account menu at the top."
}

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
			home += "?" + welcomeParam // the queue welcomes the new reviewer, and says so
		} else {
			setPageNotice(w, r, "/", joinedNotice(m, len(s.Accounts) > 0))
		}
		redirect(w, r, home)
	})
}
