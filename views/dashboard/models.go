// Package dashboard holds the account dashboard's pages: sign-in, the
// overview with usage, API keys, the audit log, and the error pages.
package dashboard

import (
	"time"

	"github.com/arbiterhq/arbiter"
)

// Provider is a sign-in button for an identity provider.
type Provider struct {
	Name  string // the route's name: github, google, oidc
	Label string // "GitHub", …
	URL   string // where the button leads: /auth/{name}?next=…
}

// EmailSentView answers a request for a sign-in link.
type EmailSentView struct {
	Email string // the address the link is for
	InLog bool   // the link was written to the server's log, not mailed
}

// EmailConfirmView is the page a sign-in link opens.
type EmailConfirmView struct {
	Token string // the link's token, posted back by the button
	Next  string // where to go after signing in
	Email string // the address the link signs in as
}

// SignInView is the sign-in page.
type SignInView struct {
	Providers []Provider
	Email     string // the address typed so far
	Next      string // where to go after signing in
	Error     string // why the last attempt failed
	SignedOut bool   // the person has just signed out
	DemoURL   string // the reviewer's desk on the demo queue, for a visitor without an account
}

// HomeView is the overview.
type HomeView struct {
	Used, Cap  int    // today's tasks and the daily cap
	ActiveKeys int    // keys that can still authenticate
	BaseURL    string // the API's origin, for the example
	// Drifts are the account's open calibration drifts, by policy.
	Drifts []arbiter.Drift
	// Notice confirms what led here (joining the account), once.
	Notice string
}

// KeysView is the API keys page.
type KeysView struct {
	Keys []*arbiter.APIKey
	// Created is the key just created, with its plaintext: shown once.
	Created *CreatedKey
	// Revoked is the key just revoked, to confirm it.
	Revoked *arbiter.APIKey
	// Name and Error echo a refused create form.
	Name, Error string
	Now         time.Time
}

// CreatedKey is a new key's record and its plaintext.
type CreatedKey struct {
	Key       *arbiter.APIKey
	Plaintext string
}

// ErrorView is an error page.
type ErrorView struct {
	Status  int
	Title   string
	Message string
	// Review marks a page of the reviewer site, which leads back to the
	// review queue rather than the dashboard.
	Review bool
}

// TasksView is the account's task list: one page, newest first, with the
// filters that chose it.
type TasksView struct {
	Tasks []*arbiter.Task
	// Status and Source are the filters as the person set them.
	Status, Source string
	// Older is the address of the next page, "" on the last one; Newest
	// leads back to the first page, "" on it.
	Older, Newest string
	// Error says why the filters were refused.
	Error string
	Now   time.Time
}

// TaskView is one task of the account with its attempts and context.
type TaskView struct {
	Task *arbiter.Task
	// DeskURL is the task on the reviewer's desk, set while it waits for a
	// human.
	DeskURL string
	Now     time.Time
}

// MembersView is the members page: who is in the account, the pending
// invitations and the form to invite.
type MembersView struct {
	Members     []*arbiter.Membership
	Invitations []*arbiter.Invitation
	// Self is the signed-in person, whose own row offers no removal.
	Self string
	// Roles are the roles the signed-in person may give.
	Roles []string
	// Email and Role echo a refused invitation; Error says why.
	Email, Role, Error string
	// Notice confirms what was just done.
	Notice string
	Now    time.Time
}

// CanManage reports whether the signed-in person may change the member m.
func (v MembersView) CanManage(m *arbiter.Membership) bool {
	if m.PersonID == v.Self {
		return false
	}
	for _, r := range v.Roles {
		if r == m.Role {
			return true
		}
	}
	return false
}

// InvitationView is the page an invitation's link opens.
type InvitationView struct {
	Invitation *arbiter.Invitation
	Token      string
	// SignedInAs is the signed-in person's address; "" for a visitor.
	SignedInAs string
	// SignInURL signs in and comes back to this page.
	SignInURL string
}

// InvitationUsedView is the page an invitation's link opens again for the
// person it made a member.
type InvitationUsedView struct {
	Membership *arbiter.Membership
	// QueueURL is the reviewer site's queue; OverviewURL the dashboard,
	// "" for a role that has none.
	QueueURL, OverviewURL string
}

// AccountDeletedView is the page after an account's deletion.
type AccountDeletedView struct {
	// NextAccount names the account the person's session moved to; ""
	// when they are a member of no other.
	NextAccount string
}

// SettingsView is the account's settings page.
type SettingsView struct {
	// AccountName is the account's e-mail address, which names it; an
	// owner types it to delete the account.
	AccountName string
	// CanDelete shows the deletion form, to owners.
	CanDelete bool
	// DeleteError says why a deletion was refused.
	DeleteError string
	// ReservationMinutes is how long opening a task reserves it, as shown
	// or as typed.
	ReservationMinutes string
	// NotifyMinutes is after how many minutes of waiting reviewers are
	// e-mailed, as shown or typed; "" for never.
	NotifyMinutes string
	// GoldPercent is how often the desk serves a waiting gold task first,
	// a percentage as shown or typed.
	GoldPercent string
	// Error says why the form was refused, beside the field ErrorField
	// names (its input's name); Saved confirms it was not.
	Error, ErrorField string
	Saved             bool
}

// describedBy is what describes the settings field: its help, and the
// error when it is about the field.
func (v SettingsView) describedBy(field, help string) string {
	if v.ErrorField == field && v.Error != "" {
		return help + " settings-error"
	}
	return help
}
