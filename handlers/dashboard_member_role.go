package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardMemberRole handles POST /members/{id}/role: it gives the member
// the role chosen.
func DashboardMemberRole(members arbiter.MemberService, now arbiter.Clock) http.Handler {
	return memberChange(members, now, func(r *http.Request, accountID, personID string) (string, error) {
		role := r.PostFormValue("role")
		revoked, err := members.ChangeRole(r.Context(), accountID, personID, role, ActorOf(r))
		if err != nil {
			return "", err
		}
		return "The role was changed to " + arbiter.RoleLabel(role) + "." + revokedNotice(revoked), nil
	})
}
