package arbiter

import (
	"context"
	"time"
)

// Roles a person can hold in an account.
const (
	// RoleOwner may do everything, owners and the account itself included.
	RoleOwner = "owner"
	// RoleAdmin manages keys, webhooks, settings and members, but not
	// owners.
	RoleAdmin = "admin"
	// RoleReviewer works the review queue and sees the calibration report
	// and the desk's stats; no keys, no settings.
	RoleReviewer = "reviewer"
)

// Roles lists the roles from the most to the least powerful, as forms offer
// them.
var Roles = []string{RoleOwner, RoleAdmin, RoleReviewer}

// RoleLabel names a role for people.
func RoleLabel(role string) string {
	switch role {
	case RoleOwner:
		return "Owner"
	case RoleAdmin:
		return "Admin"
	case RoleReviewer:
		return "Reviewer"
	}
	return role
}

// CheckRole returns EINVALID unless role is one of Roles.
func CheckRole(role string) error {
	for _, r := range Roles {
		if role == r {
			return nil
		}
	}
	return Errorf(EINVALID, "Pick a role: owner, admin or reviewer.")
}

// Action is something a member may or may not do in an account; Can decides.
type Action string

// The actions pages and store calls check.
const (
	ActionViewOverview    Action = "view_overview"     // the dashboard's overview: usage and keys at a glance
	ActionViewTasks       Action = "view_tasks"        // the dashboard's task list and task pages
	ActionManageKeys      Action = "manage_keys"       // list, create and revoke API keys
	ActionManageWebhooks  Action = "manage_webhooks"   // webhook endpoints and their deliveries
	ActionManageSettings  Action = "manage_settings"   // the account's settings
	ActionViewAudit       Action = "view_audit"        // the audit log
	ActionManageMembers   Action = "manage_members"    // invite, remove and change the role of members
	ActionDeleteAccount   Action = "delete_account"    // delete the account
	ActionReview          Action = "review"            // the review queue and its desk
	ActionViewCalibration Action = "view_calibration"  // the calibration report
	ActionViewStats       Action = "view_stats"        // the desk's stats: the team's and one's own
	ActionViewMemberStats Action = "view_member_stats" // every member's own line of the desk's stats
	ActionManagePolicies  Action = "manage_policies"   // the account's policies per task type
	ActionBacktest        Action = "backtest"          // start backtests of the verifiers file's verifiers and read their runs
)

// roleActions is the one table of who may do what.
var roleActions = map[string]map[Action]bool{
	RoleOwner: {
		ActionViewOverview: true, ActionViewTasks: true, ActionManageKeys: true, ActionManageWebhooks: true,
		ActionManageSettings: true, ActionViewAudit: true, ActionManageMembers: true, ActionDeleteAccount: true,
		ActionReview: true, ActionViewCalibration: true, ActionViewStats: true, ActionViewMemberStats: true,
		ActionManagePolicies: true, ActionBacktest: true,
	},
	RoleAdmin: {
		ActionViewOverview: true, ActionViewTasks: true, ActionManageKeys: true, ActionManageWebhooks: true,
		ActionManageSettings: true, ActionViewAudit: true, ActionManageMembers: true,
		ActionReview: true, ActionViewCalibration: true, ActionViewStats: true, ActionViewMemberStats: true,
		ActionManagePolicies: true,
	},
	RoleReviewer: {
		ActionReview: true, ActionViewCalibration: true, ActionViewStats: true,
	},
}

// Can reports whether a member with the role may do the action. An unknown
// role, and no role at all, may do nothing.
func Can(role string, action Action) bool {
	return roleActions[role][action]
}

// ErrNotAllowed is the answer to a member asking for what their role does not
// allow: the same not-found as any object of another account, so a page or an
// object that is not theirs cannot be told from one that does not exist.
var ErrNotAllowed = Errorf(ENOTFOUND, "There is nothing at this address. It may have moved, or the link may be mistyped.")

// CheckMemberChange returns nil when a member with the role actor may give
// a member whose role is from (or "" for a new member) the role to (or ""
// to remove them). Admins manage admins and reviewers; only owners make,
// change or remove owners. Returns ErrNotAllowed for a role that manages no
// members, and EINVALID for the rest.
func CheckMemberChange(actor, from, to string) error {
	if !Can(actor, ActionManageMembers) {
		return ErrNotAllowed
	}
	if to != "" {
		if err := CheckRole(to); err != nil {
			return err
		}
	}
	if actor != RoleOwner && (from == RoleOwner || to == RoleOwner) {
		return Errorf(EINVALID, "Only an owner can make, change or remove an owner.")
	}
	return nil
}

// InviterMayStillInvite reports whether an invitation for role stays good
// while the member who sent it holds inviterRole ("" once they are no
// longer a member): they must still be allowed to invite for that role
// (CheckMemberChange). An invitation the operator sent always does.
// Removing a member or lowering their role revokes the pending invitations
// they sent that this refuses, and accepting one checks it again, so a
// departing admin leaves no way back in.
func InviterMayStillInvite(invitedBy, inviterRole, role string) bool {
	if invitedBy == OperatorActor {
		return true
	}
	return CheckMemberChange(inviterRole, "", role) == nil
}

// ErrLastOwner refuses to leave an account without an owner.
var ErrLastOwner = Errorf(ECONFLICT, "An account needs at least one owner: make someone else an owner first.")

// Person is someone who signs in, by any method; their verified e-mail
// address identifies them. A person is a member of any number of accounts.
type Person struct {
	ID        string
	Email     string
	CreatedAt Timestamp
}

// NewPersonID returns a fresh person id.
func NewPersonID() string { return NewID("per_", 8) }

// Membership is a person's place in an account: their role there.
type Membership struct {
	AccountID   string
	AccountName string // the account's e-mail, which names it
	PersonID    string
	Email       string // the person's
	Role        string
	CreatedAt   Timestamp
}

// MaxMemberships bounds the accounts a session lists in its switcher and the
// members an account page lists: both are read on every page.
const MaxMemberships = 200

// InvitationTTL is how long an invitation's link can be used.
const InvitationTTL = 7 * 24 * time.Hour

// Invitation asks someone, by e-mail address, to join an account with a
// role. Its link's token is stored only hashed and works once.
type Invitation struct {
	ID          string
	AccountID   string
	AccountName string
	Email       string
	Role        string
	InvitedBy   string // the inviter's e-mail
	CreatedAt   Timestamp
	ExpiresAt   Timestamp
}

// NewInvitationID returns a fresh invitation id.
func NewInvitationID() string { return NewID("inv_", 8) }

// ErrInvitationInvalid is the one answer for an invitation link that is
// unknown, used, revoked or expired.
var ErrInvitationInvalid = Errorf(EUNAUTHORIZED, "This invitation has expired, was revoked, or was already used. Ask the account's owner for a new one.")

// CheckInvitee returns nil when a person who signed in with the verified
// addresses may accept an invitation for email (SameEmail: ASCII letters
// in any case, nothing folded by Unicode); EUNAUTHORIZED otherwise.
func CheckInvitee(inv *Invitation, addresses []string) error {
	for _, a := range addresses {
		if SameEmail(a, inv.Email) {
			return nil
		}
	}
	return Errorf(EUNAUTHORIZED, "This invitation is for %s. Sign out, then sign in with that address (by e-mail link or a provider that has verified it).", inv.Email)
}

// Audit event kinds of members and invitations.
const (
	AuditMemberInvited     = "member_invited"
	AuditInvitationRevoked = "invitation_revoked"
	AuditMemberJoined      = "member_joined"
	AuditMemberRemoved     = "member_removed"
	AuditRoleChanged       = "role_changed"
	AuditSettingsChanged   = "settings_changed"
)

// InvitationMailer delivers invitations, by the same path as sign-in links.
type InvitationMailer interface {
	// SendInvitation sends link, which joins accountName as role, to the
	// address.
	SendInvitation(ctx context.Context, to, accountName, role, link string) error
}

// InvitationMailerOf returns how mailer delivers invitations: its own
// SendInvitation, or else its SendLoginLink with the invitation's link.
func InvitationMailerOf(mailer LoginMailer) InvitationMailer {
	if m, ok := mailer.(InvitationMailer); ok {
		return m
	}
	return loginLinkInviter{mailer}
}

// loginLinkInviter sends invitations as sign-in links.
type loginLinkInviter struct{ LoginMailer }

// SendInvitation sends the invitation's link as a sign-in link.
func (m loginLinkInviter) SendInvitation(ctx context.Context, to, _, _, link string) error {
	return m.SendLoginLink(ctx, to, link)
}

// MemberService keeps accounts' members and invitations. Every change takes
// the actor and checks their role in the account inside its transaction
// (Can and CheckMemberChange), so a member removed a moment ago changes
// nothing; every change goes into the account's audit log.
type MemberService interface {
	// ListMembers returns the account's members, owners first, at most
	// MaxMemberships of them.
	ListMembers(ctx context.Context, accountID string) ([]*Membership, error)

	// ChangeRole gives the member the role, and revokes the pending
	// invitations they sent that the new role may not send
	// (InviterMayStillInvite), each in the audit log; it returns how many
	// it revoked. Returns ErrNotAllowed when the actor may not manage
	// members or the person is not a member, EINVALID as CheckMemberChange
	// does, and ErrLastOwner for the last owner.
	ChangeRole(ctx context.Context, accountID, personID, role string, by Actor) (revoked int, err error)

	// RemoveMember ends the person's membership, and revokes every pending
	// invitation they sent to the account; their sessions lose the account
	// at once. It returns how many invitations it revoked. Returns errors as
	// ChangeRole does.
	RemoveMember(ctx context.Context, accountID, personID string, by Actor) (revoked int, err error)

	// CreateInvitation invites the address to the account with the role
	// and returns the invitation and its link's token, which is stored
	// only hashed. Returns EINVALID for a bad address (CheckEmailDomain
	// included) or role, ErrNotAllowed
	// or EINVALID as CheckMemberChange does, and ECONFLICT when the
	// address is a member already.
	CreateInvitation(ctx context.Context, accountID, email, role string, by Actor) (*Invitation, string, error)

	// ListInvitations returns the account's pending invitations, newest
	// first, at most MaxMemberships.
	ListInvitations(ctx context.Context, accountID string) ([]*Invitation, error)

	// RevokeInvitation withdraws a pending invitation. Returns ENOTFOUND
	// for an unknown, used or another account's invitation.
	RevokeInvitation(ctx context.Context, accountID, invitationID string, by Actor) error

	// FindInvitationByToken returns the pending invitation of a link, or
	// ErrInvitationInvalid.
	FindInvitationByToken(ctx context.Context, token string) (*Invitation, error)

	// AcceptInvitation uses the link up and makes the person a member with
	// the invitation's role, when one of the verified addresses the person
	// signed in with matches it (CheckInvitee) and its inviter may still
	// invite for the role (InviterMayStillInvite). Returns
	// ErrInvitationInvalid for a link that is unknown, used, revoked or
	// expired, or whose inviter may no longer send it, EUNAUTHORIZED for another person, and ECONFLICT, using
	// nothing up, when the person is a member already.
	AcceptInvitation(ctx context.Context, token, personID string, client Client) (*Membership, error)

	// MembershipOfUsedInvitation returns the person's membership of the
	// account a used invitation link joined, when the person is a member
	// of it now: the link opened again after joining. Returns
	// ErrInvitationInvalid for any other link or person, so that it tells
	// nothing more than the link does.
	MembershipOfUsedInvitation(ctx context.Context, token, personID string) (*Membership, error)
}
