package arbiter

import (
	"context"
	"strings"
	"time"
)

// Chat links (issue 41 item 6): a click in a chat app decides as a
// member of the account only once that chat user is linked to the
// person, and only the person can link it, by signing in to Arbiter.
//
// A chat workspace vouches for its users' e-mail addresses, but whoever
// administers the workspace can give any user any address: a person who
// controls a workspace connected to the account could otherwise click
// as a second member and meet a two-person rule alone. So the first
// click of a chat user whose confirmed address is a member's is answered
// with a link, seen by the clicker only; the link works for the person
// who signs in to Arbiter with that address (an address Arbiter's own
// sign-in verified), for ChatLinkTTL, once, and links the chat user to
// them. Later clicks decide as that person.

// Chat providers whose users link to people.
const (
	ChatSlack = "slack"
	ChatTeams = "teams"
)

// ChatLinkTTL is how long a link offered to a chat user can be used.
const ChatLinkTTL = 15 * time.Minute

// ChatUser is a chat app's user: its provider, its workspace there (a
// Slack team, a Teams tenant), its id in it, and the address the
// provider confirmed for it.
type ChatUser struct {
	Provider, Workspace, UserID, Email string
}

// ChatProviderLabel names a chat provider for people.
func ChatProviderLabel(provider string) string {
	switch provider {
	case ChatSlack:
		return "Slack"
	case ChatTeams:
		return "Microsoft Teams"
	}
	return provider
}

// ChatLinkOffer is what a link offers: to link User to the person who
// signs in with User.Email, offered in the account.
type ChatLinkOffer struct {
	AccountID string
	User      ChatUser
	ExpiresAt Timestamp
}

var (
	// ErrChatLinkInvalid is the one answer for a link that is unknown,
	// used or expired.
	ErrChatLinkInvalid = Errorf(ENOTFOUND, "This link has expired or was already used. Click a button in the chat again for a new one.")
)

// ChatLinkOther is the answer to a person who opened a link offered to
// someone else: it names the address to sign in with, which the person
// who clicked in the chat saw there already.
func ChatLinkOther(email string) error {
	return Errorf(EUNAUTHORIZED, "This link is for the member who signs in with %s. Sign out, then sign in with that address to link it.", strings.ToLower(email))
}

// Chat link audit event kinds.
const (
	AuditChatLinked = "chat_linked"
)

// NewChatLinkAuditEvent is the audit log's line for a chat user linked
// to the person by.
func NewChatLinkAuditEvent(accountID string, u ChatUser, by Actor) *AuditEvent {
	return &AuditEvent{AccountID: accountID, Kind: AuditChatLinked, Actor: by.Email,
		Detail:   ChatProviderLabel(u.Provider) + " user " + u.UserID + " of " + u.Workspace + " linked",
		ClientIP: by.Client.IP, UserAgent: by.Client.UserAgent}
}

// ChatLinkService links chat users to people.
type ChatLinkService interface {
	// FindChatMember returns the member of the account linked to the chat
	// user, or ENOTFOUND when the user is linked to nobody or to someone
	// who is not a member.
	FindChatMember(ctx context.Context, accountID string, u ChatUser) (*Membership, error)

	// OfferChatLink returns a new link's token for the chat user, to be
	// shown to them only, when a member of the account signs in with
	// u.Email; ENOTFOUND when none does.
	OfferChatLink(ctx context.Context, accountID string, u ChatUser) (token string, err error)

	// FindChatLinkOffer returns what the token offers to the person,
	// changing nothing; ErrChatLinkInvalid when it is unknown, used or
	// expired, ChatLinkOther's error when the person does not sign in
	// with the offer's address.
	FindChatLinkOffer(ctx context.Context, token, personID string) (*ChatLinkOffer, error)

	// LinkChatUser uses the token up and links its chat user to the
	// person by, who must sign in with the offer's address (their own or
	// an identity's); records it in the offer account's audit log.
	// ErrChatLinkInvalid for an unknown, used or expired token,
	// ChatLinkOther's error for anyone else.
	LinkChatUser(ctx context.Context, token string, by Actor) (*ChatLinkOffer, error)
}
