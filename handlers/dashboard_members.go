package handlers

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// membersPage renders the members page, with v's notice or form error,
// after reading the account's members and pending invitations.
func membersPage(w http.ResponseWriter, r *http.Request, members arbiter.MemberService, now arbiter.Clock, status int, v dashboard.MembersView) {
	ctx := r.Context()
	s := arbiter.SessionFromContext(ctx)
	list, err := members.ListMembers(ctx, s.AccountID)
	if err != nil {
		Error(w, r, err)
		return
	}
	invitations, err := members.ListInvitations(ctx, s.AccountID)
	if err != nil {
		Error(w, r, err)
		return
	}
	v.Members, v.Invitations, v.Self, v.Now = list, invitations, s.PersonID, now()
	for _, role := range arbiter.Roles {
		if arbiter.CheckMemberChange(s.Role, "", role) == nil {
			v.Roles = append(v.Roles, role)
		}
	}
	Render(w, r, status, dashboard.Members(PageOf(r, "Members", "members"), v))
}

// DashboardMembers handles GET /members: the account's members, its
// pending invitations and the form to invite someone.
func DashboardMembers(members arbiter.MemberService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		membersPage(w, r, members, now, http.StatusOK, dashboard.MembersView{Notice: takePageNotice(w, r, "/members")})
	})
}

// revokedNotice says how many pending invitations a member's removal or
// new role revoked, since they may no longer send them; "" for none.
func revokedNotice(revoked int) string {
	switch revoked {
	case 0:
		return ""
	case 1:
		return " The pending invitation they sent was revoked."
	}
	return fmt.Sprintf(" The %d pending invitations they sent were revoked.", revoked)
}

// memberChange runs a change to the member or invitation of the path's id
// and leads (303) to the members page, which confirms it, or answers the
// page with why it was refused; an id that is not the account's is not
// found.
func memberChange(members arbiter.MemberService, now arbiter.Clock, change func(r *http.Request, accountID, id string) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		notice, err := change(r, s.AccountID, r.PathValue("id"))
		if code := arbiter.ErrorCode(err); code == arbiter.EINVALID || code == arbiter.ECONFLICT {
			membersPage(w, r, members, now, StatusOf(err), dashboard.MembersView{Error: arbiter.ErrorMessage(err)})
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		setPageNotice(w, r, "/members", notice)
		redirect(w, r, "/members")
	})
}
