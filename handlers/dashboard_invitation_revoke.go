package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardInvitationRevoke handles POST /invitations/{id}/revoke: the
// invitation's link no longer works.
func DashboardInvitationRevoke(members arbiter.MemberService, now arbiter.Clock) http.Handler {
	return memberChange(members, now, func(r *http.Request, accountID, id string) (string, error) {
		if err := members.RevokeInvitation(r.Context(), accountID, id, ActorOf(r)); err != nil {
			return "", err
		}
		return "The invitation was revoked.", nil
	})
}
