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

func TestCheckInvitee(t *testing.T) {
	inv := &arbiter.Invitation{Email: "rev@example.com"}
	if err := arbiter.CheckInvitee(inv, []string{"x@example.com", "Rev@Example.com"}); err != nil {
		t.Errorf("a matching address is refused: %v", err)
	}
	if err := arbiter.CheckInvitee(inv, []string{"x@example.com"}); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
		t.Errorf("another address = %v", err)
	}
}
