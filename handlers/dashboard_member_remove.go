package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardMemberRemove handles POST /members/{id}/remove: the member
// loses the account at once, in every session.
func DashboardMemberRemove(members arbiter.MemberService, now arbiter.Clock) http.Handler {
	return memberChange(members, now, func(r *http.Request, accountID, personID string) (string, error) {
		revoked, err := members.RemoveMember(r.Context(), accountID, personID, ActorOf(r))
		if err != nil {
			return "", err
		}
		return "The member was removed." + revokedNotice(revoked), nil
	})
}
