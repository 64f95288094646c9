package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
	"github.com/arbiterhq/arbiter/views/layouts"
)

// InvitationShow handles GET /invitations/accept?token=…, the page an
// invitation's link opens: what it joins, and a button that accepts it for
// a signed-in person, or the way to sign in first and come back. Opening
// the link uses nothing up.
func InvitationShow(members arbiter.MemberService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The token is in this page's address: never send it on.
		w.Header().Set("Referrer-Policy", layouts.SecretAddressReferrer)
		token := r.URL.Query().Get("token")
		inv, err := members.FindInvitationByToken(r.Context(), token)
		if err != nil {
			if s := arbiter.SessionFromContext(r.Context()); s != nil && errors.Is(err, arbiter.ErrInvitationInvalid) {
				// The link opened again by the person it made a member.
				if m, err := members.MembershipOfUsedInvitation(r.Context(), token, s.PersonID); err == nil {
					invitationUsed(w, r, m)
					return
				}
			}
			Error(w, r, err)
			return
		}
		v := dashboard.InvitationView{Invitation: inv, Token: token,
			SignInURL: signInFor(SiteFromContext(r.Context()).SignInURL(r.URL.RequestURI()), inv.Email)}
		if s := arbiter.SessionFromContext(r.Context()); s != nil {
			v.SignedInAs = s.Email
		}
		p := PageOf(r, "Join "+inv.AccountName, "")
		p.SecretAddress = true
		Render(w, r, http.StatusOK, dashboard.Invitation(p, v))
	})
}

// invitationUsed answers the page of a used invitation for the member it
// made: where their work is, in the account it joined.
func invitationUsed(w http.ResponseWriter, r *http.Request, m *arbiter.Membership) {
	site := SiteFromContext(r.Context())
	v := dashboard.InvitationUsedView{Membership: m, QueueURL: site.ReviewHome()}
	if arbiter.Can(m.Role, arbiter.ActionViewOverview) {
		v.OverviewURL = site.AppLink("/")
	}
	p := PageOf(r, "Already a member of "+m.AccountName, "")
	p.SecretAddress = true
	Render(w, r, http.StatusOK, dashboard.InvitationUsed(p, v))
}

// signInFor is the sign-in link to, with the form filled in with the
// invited address.
func signInFor(to, email string) string {
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	return to + sep + "email=" + url.QueryEscape(email)
}
