package arbiter_test

import (
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestCan(t *testing.T) {
	for _, c := range []struct {
		role   string
		action arbiter.Action
		want   bool
	}{
		{arbiter.RoleOwner, arbiter.ActionDeleteAccount, true},
		{arbiter.RoleAdmin, arbiter.ActionDeleteAccount, false},
		{arbiter.RoleOwner, arbiter.ActionBacktest, true},
		{arbiter.RoleAdmin, arbiter.ActionBacktest, false},
		{arbiter.RoleReviewer, arbiter.ActionBacktest, false},
		{arbiter.RoleAdmin, arbiter.ActionManageKeys, true},
		{arbiter.RoleAdmin, arbiter.ActionManageMembers, true},
		{arbiter.RoleReviewer, arbiter.ActionManageKeys, false},
		{arbiter.RoleReviewer, arbiter.ActionManageWebhooks, false},
		{arbiter.RoleReviewer, arbiter.ActionManageSettings, false},
		{arbiter.RoleReviewer, arbiter.ActionViewAudit, false},
		{arbiter.RoleReviewer, arbiter.ActionReview, true},
		{arbiter.RoleReviewer, arbiter.ActionViewCalibration, true},
		{arbiter.RoleReviewer, arbiter.ActionViewStats, true},
		{"", arbiter.ActionReview, false},
		{"boss", arbiter.ActionReview, false},
	} {
		if got := arbiter.Can(c.role, c.action); got != c.want {
			t.Errorf("Can(%q, %s) = %v, want %v", c.role, c.action, got, c.want)
		}
	}
}

func TestCheckMemberChange(t *testing.T) {
	const o, a, r = arbiter.RoleOwner, arbiter.RoleAdmin, arbiter.RoleReviewer
	for _, c := range []struct {
		actor, from, to string
		want            string // error code, "" for allowed
	}{
		{o, "", o, ""},
		{o, o, r, ""},
		{o, a, "", ""},
		{a, "", r, ""},
		{a, r, a, ""},
		{a, a, "", ""},
		{a, "", o, arbiter.EINVALID},
		{a, o, r, arbiter.EINVALID},
		{a, o, "", arbiter.EINVALID},
		{a, r, o, arbiter.EINVALID},
		{o, r, "boss", arbiter.EINVALID},
		{r, "", r, arbiter.ENOTFOUND},
		{r, r, "", arbiter.ENOTFOUND},
	} {
		if got := arbiter.ErrorCode(arbiter.CheckMemberChange(c.actor, c.from, c.to)); got != c.want {
			t.Errorf("CheckMemberChange(%q, %q, %q) = %q, want %q", c.actor, c.from, c.to, got, c.want)
		}
	}
}

func TestInviterMayStillInvite(t *testing.T) {
	const o, a, r = arbiter.RoleOwner, arbiter.RoleAdmin, arbiter.RoleReviewer
	for _, c := range []struct {
		invitedBy, inviterRole, role string
		want                         bool
	}{
		{"owner@example.com", o, o, true},
		{"owner@example.com", o, a, true},
		{"admin@example.com", a, a, true},
		{"admin@example.com", a, r, true},
		// Demoted: an owner made admin may no longer invite owners, and an
		// admin made reviewer may invite nobody.
		{"was-owner@example.com", a, o, false},
		{"was-admin@example.com", r, a, false},
		{"was-admin@example.com", r, r, false},
		// Removed: no role, no invitations.
		{"gone@example.com", "", a, false},
		{"gone@example.com", "", r, false},
		// The operator's invitations do not hang on a membership.
		{arbiter.OperatorActor, "", o, true},
	} {
		if got := arbiter.InviterMayStillInvite(c.invitedBy, c.inviterRole, c.role); got != c.want {
			t.Errorf("InviterMayStillInvite(%q, %q, %q) = %v, want %v", c.invitedBy, c.inviterRole, c.role, got, c.want)
		}
	}
}

func TestCheckInvitee(t *testing.T) {
	inv := &arbiter.Invitation{Email: "rev@example.com"}
	if err := arbiter.CheckInvitee(inv, []string{"x@example.com", "Rev@Example.com"}); err != nil {
		t.Errorf("a matching address is refused: %v", err)
	}
	if err := arbiter.CheckInvitee(inv, []string{"x@example.com"}); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
		t.Errorf("another address = %v", err)
	}
}

// TestCheckInvitee_NoUnicodeCaseFolding: look-alikes that Unicode case
// folding makes equal to an invited ASCII address (the Kelvin sign K for
// k, the long s ſ for s, the dotted İ for i) do not match it, through the
// comparison or through normalization.
func TestCheckInvitee_NoUnicodeCaseFolding(t *testing.T) {
	for _, c := range []struct{ invited, verified string }{
		{"kate@example.com", "\u212Aate@example.com"},
		{"kate@example.com", "\u212AATE@example.com"},
		{"sam@example.com", "\u017Fam@example.com"},
		{"sam@example.com", "SAM@example.\u017Fe"},
		{"ivan@example.com", "\u0130van@example.com"},
	} {
		inv := &arbiter.Invitation{Email: c.invited}
		if err := arbiter.CheckInvitee(inv, []string{c.verified}); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Errorf("%q accepts the invitation for %q: %v", c.verified, c.invited, err)
		}
		if normalized, err := arbiter.NormalizeEmail(c.verified); err == nil {
			if err := arbiter.CheckInvitee(inv, []string{normalized}); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
				t.Errorf("%q, normalized to %q, accepts the invitation for %q", c.verified, normalized, c.invited)
			}
			if normalized == c.invited {
				t.Errorf("NormalizeEmail(%q) = %q, the invited address", c.verified, normalized)
			}
		}
	}
	// ASCII letters still match in any case.
	if err := arbiter.CheckInvitee(&arbiter.Invitation{Email: "kate@example.com"}, []string{" KATE@Example.COM "}); err != nil {
		t.Errorf("an ASCII address in capitals: %v", err)
	}
	if got, err := arbiter.NormalizeEmail("Kate@Example.COM"); err != nil || got != "kate@example.com" {
		t.Errorf("NormalizeEmail(Kate@Example.COM) = %q, %v", got, err)
	}
}
