package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardMemberInvite handles POST /members/invite: it invites the
// address with the role and mails the link, by the path sign-in links take.
// A refused address or role answers the page with the form as typed and
// why; an invitation made leads (303) to the members page, which confirms
// it, so a reload sends nothing again.
func DashboardMemberInvite(members arbiter.MemberService, mailer arbiter.LoginMailer, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		email, role := r.PostFormValue("email"), r.PostFormValue("role")
		inv, token, err := members.CreateInvitation(r.Context(), s.AccountID, email, role, ActorOf(r))
		if code := arbiter.ErrorCode(err); code == arbiter.EINVALID || code == arbiter.ECONFLICT {
			membersPage(w, r, members, now, StatusOf(err), dashboard.MembersView{Email: email, Role: role, Error: arbiter.ErrorMessage(err)})
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		link := SiteFromContext(r.Context()).AppURL + "/invitations/accept?token=" + token
		if err := arbiter.InvitationMailerOf(mailer).SendInvitation(r.Context(), inv.Email, inv.AccountName, inv.Role, link); err != nil {
			Error(w, r, err)
			return
		}
		notice := "Invitation sent to " + inv.Email + " as " + arbiter.RoleLabel(inv.Role) + "."
		if arbiter.LoginLinksGoToLog(mailer) {
			notice = "Invitation made for " + inv.Email + ". No mail server is set up, so its link is in the server's log."
		}
		setPageNotice(w, r, "/members", notice)
		redirect(w, r, "/members")
	})
}
