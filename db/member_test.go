package db_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// actor returns the person of the address as the actor of a change.
func actor(p *arbiter.Person) arbiter.Actor {
	return arbiter.Actor{Email: p.Email, PersonID: p.ID}
}

// invite invites the address to the account as role on by's behalf and
// returns the link's token.
func invite(t *testing.T, d *db.DB, accountID, email, role string, by *arbiter.Person) string {
	t.Helper()
	inv, token, err := d.CreateInvitation(ctx, accountID, email, role, actor(by))
	if err != nil {
		t.Fatalf("invite %s: %v", email, err)
	}
	if inv.Email != email || inv.Role != role || len(token) != 64 {
		t.Fatalf("invitation = %+v, token %q", inv, token)
	}
	return token
}

// second returns the error of a call that also returns a count.
func second(_ int, err error) error { return err }

// TestMemberService_RemovedInvitersInvitationsAreRevoked: invitations an
// admin sent do not outlive their power to send them. Removing the admin
// revokes them all, in the audit log; demoting an owner to admin revokes
// only their owner invitations; and a link whose inviter lost the power
// another way (a row from before the rule) is refused on accept.
func TestMemberService_RemovedInvitersInvitationsAreRevoked(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		join := func(email, role string) *arbiter.Person {
			token := invite(t, d, acct.ID, email, role, owner)
			p := personOf(t, d, email)
			if _, err := d.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
				t.Fatal(err)
			}
			return p
		}
		admin := join("admin@example.com", arbiter.RoleAdmin)
		coOwner := join("co@example.com", arbiter.RoleOwner)
		backdoor := invite(t, d, acct.ID, "back@example.com", arbiter.RoleAdmin, admin)
		invite(t, d, acct.ID, "rev1@example.com", arbiter.RoleReviewer, admin)
		ownersOwn := invite(t, d, acct.ID, "stays@example.com", arbiter.RoleReviewer, owner)

		revoked, err := d.RemoveMember(ctx, acct.ID, admin.ID, actor(owner))
		if err != nil || revoked != 2 {
			t.Fatalf("remove the admin = %d revoked, %v; want 2", revoked, err)
		}
		back := personOf(t, d, "back@example.com")
		_, err = d.AcceptInvitation(ctx, backdoor, back.ID, arbiter.Client{})
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		pending, err := d.ListInvitations(ctx, acct.ID)
		if err != nil || len(pending) != 1 || pending[0].Email != "stays@example.com" {
			t.Fatalf("pending after the removal = %+v, %v", pending, err)
		}
		events, err := d.ListAuditEvents(ctx, acct.ID, 50)
		if err != nil {
			t.Fatal(err)
		}
		var said int
		for _, e := range events {
			if e.Kind == arbiter.AuditInvitationRevoked && strings.Contains(e.Detail, "sent by admin@example.com") &&
				strings.Contains(e.Detail, "removed") {
				said++
			}
		}
		if said != 2 {
			t.Errorf("the audit log records %d of the 2 revocations: %+v", said, events)
		}

		// An owner demoted to admin keeps their admin and reviewer
		// invitations and loses the owner ones.
		coAdmin := invite(t, d, acct.ID, "co-admin@example.com", arbiter.RoleAdmin, coOwner)
		coBoss := invite(t, d, acct.ID, "co-boss@example.com", arbiter.RoleOwner, coOwner)
		if revoked, err := d.ChangeRole(ctx, acct.ID, coOwner.ID, arbiter.RoleAdmin, actor(owner)); err != nil || revoked != 1 {
			t.Fatalf("demote the co-owner = %d revoked, %v; want 1", revoked, err)
		}
		boss := personOf(t, d, "co-boss@example.com")
		_, err = d.AcceptInvitation(ctx, coBoss, boss.ID, arbiter.Client{})
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		if _, err := d.AcceptInvitation(ctx, coAdmin, personOf(t, d, "co-admin@example.com").ID, arbiter.Client{}); err != nil {
			t.Fatalf("an invitation the new role may still send: %v", err)
		}

		// Demoted to reviewer, the co-owner's remaining invitation goes.
		coRev := invite(t, d, acct.ID, "co-rev@example.com", arbiter.RoleReviewer, coOwner)
		if revoked, err := d.ChangeRole(ctx, acct.ID, coOwner.ID, arbiter.RoleReviewer, actor(owner)); err != nil || revoked != 1 {
			t.Fatalf("demote to reviewer = %d revoked, %v; want 1", revoked, err)
		}
		_, err = d.AcceptInvitation(ctx, coRev, personOf(t, d, "co-rev@example.com").ID, arbiter.Client{})
		wantCode(t, err, arbiter.EUNAUTHORIZED)

		// Accepting checks the inviter again: an invitation left pending
		// by a member who is no longer allowed to send it (as rows made
		// before this rule are) does not let anyone in.
		old := invite(t, d, acct.ID, "old@example.com", arbiter.RoleAdmin, owner)
		if err := d.Exec(ctx, `UPDATE invitations SET invited_by = ? WHERE email = ?`, coOwner.Email, "old@example.com"); err != nil {
			t.Fatal(err)
		}
		_, err = d.AcceptInvitation(ctx, old, personOf(t, d, "old@example.com").ID, arbiter.Client{})
		wantCode(t, err, arbiter.EUNAUTHORIZED)

		// The owner's own invitation still works.
		if _, err := d.AcceptInvitation(ctx, ownersOwn, personOf(t, d, "stays@example.com").ID, arbiter.Client{}); err != nil {
			t.Fatalf("the owner's invitation: %v", err)
		}
	})
}

func TestMemberService_Invitations(t *testing.T) {
	t.Parallel()
	clock := &movableClock{t: time.Now()}
	dbtest.Each(t, db.Options{Now: clock.now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		token := invite(t, d, acct.ID, "rev@example.com", arbiter.RoleReviewer, owner)

		// The invitee signs in: with an invitation pending, no account of
		// their own is made, and the session has no account yet.
		rev := personOf(t, d, "rev@example.com")
		s, revToken, err := d.CreateSession(ctx, rev.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil || s.AccountID != "" || len(s.Accounts) != 0 {
			t.Fatalf("invitee's first session = %+v, %v", s, err)
		}
		// Only the hash of the token is stored; the link finds the invitation.
		if _, err := d.FindInvitationByToken(ctx, arbiter.HashToken(token)); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Errorf("the stored hash works as a link: %v", err)
		}
		if inv, err := d.FindInvitationByToken(ctx, token); err != nil || inv.AccountName != "owner@example.com" {
			t.Fatalf("find = %+v, %v", inv, err)
		}

		// Someone else, signed in with another address, is refused and
		// uses nothing up.
		other := personOf(t, d, "other@example.com")
		_, err = d.AcceptInvitation(ctx, token, other.ID, arbiter.Client{})
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		if !strings.Contains(arbiter.ErrorMessage(err), "rev@example.com") {
			t.Errorf("the refusal does not name the invited address: %v", err)
		}

		// The matching address joins with the role.
		m, err := d.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{IP: "192.0.2.9"})
		if err != nil || m.AccountID != acct.ID || m.Role != arbiter.RoleReviewer {
			t.Fatalf("accept = %+v, %v", m, err)
		}
		s, err = d.FindSessionByToken(ctx, revToken)
		if err != nil || s.AccountID != acct.ID || s.Role != arbiter.RoleReviewer {
			t.Fatalf("session after joining = %+v, %v", s, err)
		}
		// The link works once.
		_, err = d.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{})
		if err != arbiter.ErrInvitationInvalid {
			t.Errorf("second accept = %v", err)
		}

		// Expired after seven days.
		late := invite(t, d, acct.ID, "late@example.com", arbiter.RoleAdmin, owner)
		latePerson := personOf(t, d, "late@example.com")
		clock.t = clock.t.Add(arbiter.InvitationTTL + time.Minute)
		_, err = d.AcceptInvitation(ctx, late, latePerson.ID, arbiter.Client{})
		if err != arbiter.ErrInvitationInvalid {
			t.Errorf("expired accept = %v", err)
		}
		if list, _ := d.ListInvitations(ctx, acct.ID); len(list) != 0 {
			t.Errorf("expired invitations are listed as pending: %+v", list)
		}

		// Revoked: the link stops working.
		revoked := invite(t, d, acct.ID, "gone@example.com", arbiter.RoleReviewer, owner)
		list, err := d.ListInvitations(ctx, acct.ID)
		if err != nil || len(list) != 1 {
			t.Fatalf("pending = %+v, %v", list, err)
		}
		if err := d.RevokeInvitation(ctx, acct.ID, list[0].ID, actor(owner)); err != nil {
			t.Fatal(err)
		}
		wantCode(t, d.RevokeInvitation(ctx, acct.ID, list[0].ID, actor(owner)), arbiter.ENOTFOUND)
		gone := personOf(t, d, "gone@example.com")
		if _, err := d.AcceptInvitation(ctx, revoked, gone.ID, arbiter.Client{}); err != arbiter.ErrInvitationInvalid {
			t.Errorf("revoked accept = %v", err)
		}

		// A member cannot be invited again, and a reviewer invites nobody.
		_, _, err = d.CreateInvitation(ctx, acct.ID, "rev@example.com", arbiter.RoleAdmin, actor(owner))
		wantCode(t, err, arbiter.ECONFLICT)
		_, _, err = d.CreateInvitation(ctx, acct.ID, "x@example.com", arbiter.RoleReviewer, actor(rev))
		wantCode(t, err, arbiter.ENOTFOUND)
		// Bad input changes nothing.
		for _, in := range [][2]string{{"not an address", arbiter.RoleReviewer}, {"x@example.com", "boss"}, {arbiter.DemoAccountEmail, arbiter.RoleReviewer}} {
			_, _, err = d.CreateInvitation(ctx, acct.ID, in[0], in[1], actor(owner))
			wantCode(t, err, arbiter.EINVALID)
		}

		// Everything is in the audit log.
		events, err := d.ListAuditEvents(ctx, acct.ID, 50)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, e := range events {
			kinds[e.Kind]++
		}
		if kinds[arbiter.AuditMemberInvited] != 3 || kinds[arbiter.AuditMemberJoined] != 1 || kinds[arbiter.AuditInvitationRevoked] != 1 {
			t.Errorf("audit kinds = %v", kinds)
		}
	})
}

func TestMemberService_RemovalEndsAccessAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		token := invite(t, d, acct.ID, "admin@example.com", arbiter.RoleAdmin, owner)
		admin := personOf(t, d, "admin@example.com")
		if _, err := d.AcceptInvitation(ctx, token, admin.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		_, adminToken, err := d.CreateSession(ctx, admin.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil {
			t.Fatal(err)
		}
		// The admin can manage keys.
		if _, _, err := d.CreateAPIKey(ctx, acct.ID, "theirs", actor(admin)); err != nil {
			t.Fatal(err)
		}
		if _, err := d.RemoveMember(ctx, acct.ID, admin.ID, actor(owner)); err != nil {
			t.Fatal(err)
		}
		// Their session has no account any more, at its next read.
		s, err := d.FindSessionByToken(ctx, adminToken)
		if err != nil || s.AccountID != "" || s.Role != "" {
			t.Fatalf("removed member's session = %+v, %v", s, err)
		}
		// And the store refuses them, whatever a handler would let through.
		_, _, err = d.CreateAPIKey(ctx, acct.ID, "after", actor(admin))
		wantCode(t, err, arbiter.ENOTFOUND)
		wantCode(t, d.SwitchAccount(ctx, adminToken, acct.ID), arbiter.ENOTFOUND)
		task, err := d.CreateTask(ctx, acct.ID, taskCreate("Refund?"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: admin.Email, ReviewerID: admin.ID})
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}

func TestMemberService_Roles(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		join := func(email, role string) *arbiter.Person {
			token := invite(t, d, acct.ID, email, role, owner)
			p := personOf(t, d, email)
			if _, err := d.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
				t.Fatal(err)
			}
			return p
		}
		admin := join("admin@example.com", arbiter.RoleAdmin)
		rev := join("rev@example.com", arbiter.RoleReviewer)

		// A reviewer manages no keys and no members.
		_, _, err := d.CreateAPIKey(ctx, acct.ID, "no", actor(rev))
		wantCode(t, err, arbiter.ENOTFOUND)
		wantCode(t, second(d.ChangeRole(ctx, acct.ID, rev.ID, arbiter.RoleAdmin, actor(rev))), arbiter.ENOTFOUND)
		// An admin cannot make or touch an owner.
		wantCode(t, second(d.ChangeRole(ctx, acct.ID, rev.ID, arbiter.RoleOwner, actor(admin))), arbiter.EINVALID)
		wantCode(t, second(d.RemoveMember(ctx, acct.ID, owner.ID, actor(admin))), arbiter.EINVALID)
		_, _, err = d.CreateInvitation(ctx, acct.ID, "boss@example.com", arbiter.RoleOwner, actor(admin))
		wantCode(t, err, arbiter.EINVALID)
		// But manages reviewers and admins.
		if _, err := d.ChangeRole(ctx, acct.ID, rev.ID, arbiter.RoleAdmin, actor(admin)); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ChangeRole(ctx, acct.ID, rev.ID, arbiter.RoleReviewer, actor(admin)); err != nil {
			t.Fatal(err)
		}
		// The last owner stays an owner.
		wantCode(t, second(d.ChangeRole(ctx, acct.ID, owner.ID, arbiter.RoleAdmin, actor(owner))), arbiter.ECONFLICT)
		wantCode(t, second(d.RemoveMember(ctx, acct.ID, owner.ID, actor(owner))), arbiter.ECONFLICT)
		// Unknown roles and people change nothing.
		wantCode(t, second(d.ChangeRole(ctx, acct.ID, rev.ID, "boss", actor(owner))), arbiter.EINVALID)
		wantCode(t, second(d.ChangeRole(ctx, acct.ID, "per_nobody", arbiter.RoleAdmin, actor(owner))), arbiter.ENOTFOUND)

		members, err := d.ListMembers(ctx, acct.ID)
		if err != nil || len(members) != 3 || members[0].Role != arbiter.RoleOwner || members[2].Role != arbiter.RoleReviewer {
			t.Fatalf("members = %+v, %v", members, err)
		}
		// Another account's owner reaches none of it.
		other := newAccount(t, d, "other@example.com")
		stranger := personOf(t, d, "other@example.com")
		wantCode(t, second(d.RemoveMember(ctx, acct.ID, rev.ID, actor(stranger))), arbiter.ENOTFOUND)
		wantCode(t, second(d.RemoveMember(ctx, other.ID, rev.ID, actor(stranger))), arbiter.ENOTFOUND)

		// A person in two accounts switches between them.
		token := invite(t, d, other.ID, "rev@example.com", arbiter.RoleAdmin, stranger)
		if _, err := d.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		s, sessionToken, err := d.CreateSession(ctx, rev.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil || s.AccountID != acct.ID || len(s.Accounts) != 2 {
			t.Fatalf("session = %+v, %v", s, err)
		}
		if err := d.SwitchAccount(ctx, sessionToken, other.ID); err != nil {
			t.Fatal(err)
		}
		if s, err := d.FindSessionByToken(ctx, sessionToken); err != nil || s.AccountID != other.ID || s.Role != arbiter.RoleAdmin {
			t.Fatalf("after the switch = %+v, %v", s, err)
		}
		wantCode(t, d.SwitchAccount(ctx, sessionToken, arbiter.DemoAccountID), arbiter.ENOTFOUND)
	})
}

// TestMemberService_MembershipOfUsedInvitation: a used link finds the
// membership it made, for that member alone; a pending, unknown or
// someone else's link tells nothing.
func TestMemberService_MembershipOfUsedInvitation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		token := invite(t, d, acct.ID, "rev@example.com", arbiter.RoleReviewer, owner)
		rev := personOf(t, d, "rev@example.com")
		other := personOf(t, d, "other@example.com")

		if _, err := d.MembershipOfUsedInvitation(ctx, token, rev.ID); !errors.Is(err, arbiter.ErrInvitationInvalid) {
			t.Errorf("a pending link = %v, want ErrInvitationInvalid", err)
		}
		if _, err := d.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		m, err := d.MembershipOfUsedInvitation(ctx, token, rev.ID)
		if err != nil || m.AccountID != acct.ID || m.AccountName != "owner@example.com" || m.Role != arbiter.RoleReviewer || m.PersonID != rev.ID {
			t.Fatalf("the used link's membership = %+v, %v", m, err)
		}
		for name, c := range map[string][2]string{
			"another person": {token, other.ID},
			"unknown link":   {"tok_unknown", rev.ID},
		} {
			if _, err := d.MembershipOfUsedInvitation(ctx, c[0], c[1]); !errors.Is(err, arbiter.ErrInvitationInvalid) {
				t.Errorf("%s: %v, want ErrInvitationInvalid", name, err)
			}
		}
		// Removed since: the link tells nothing any more.
		if _, err := d.RemoveMember(ctx, acct.ID, rev.ID, arbiter.Actor{Email: "owner@example.com"}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.MembershipOfUsedInvitation(ctx, token, rev.ID); !errors.Is(err, arbiter.ErrInvitationInvalid) {
			t.Errorf("after removal = %v, want ErrInvitationInvalid", err)
		}
	})
}
