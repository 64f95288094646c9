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

// signInFor is the sign-in link to, with the form filled in with the
// invited address.
func signInFor(to, email string) string {
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	return to + sep + "email=" + url.QueryEscape(email)
}

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
