package arbiter

import (
	"context"
	"strings"
	"time"
)

// LoginTokenTTL is how long an e-mail sign-in link can be used.
const LoginTokenTTL = 15 * time.Minute

// ErrLoginLinkInvalid is the one answer for a sign-in link that is unknown,
// used or expired, so the link's owner learns nothing more.
var ErrLoginLinkInvalid = Errorf(EUNAUTHORIZED, "This sign-in link has expired or was already used. Ask for a new one.")

// LoginTokenService keeps the tokens of e-mail sign-in links: random,
// stored only as their SHA-256, valid for LoginTokenTTL and usable once.
type LoginTokenService interface {
	// CreateLoginToken returns a fresh token for the address.
	// Returns EINVALID for a malformed address or one CheckEmailDomain
	// refuses (dotless domains as the store is set up), and ErrDemoSignIn
	// for the demo account's.
	CreateLoginToken(ctx context.Context, email string) (string, error)

	// CheckLoginToken reports whether the token could still be redeemed,
	// without using it up, and returns the address it would sign in as.
	// Returns ErrLoginLinkInvalid when it could not.
	CheckLoginToken(ctx context.Context, token string) (email string, err error)

	// RedeemLoginToken uses the token up and returns its address.
	// Returns ErrLoginLinkInvalid for an unknown, used or expired token.
	RedeemLoginToken(ctx context.Context, token string) (email string, err error)
}

// LoginMailer delivers e-mail sign-in links.
type LoginMailer interface {
	// SendLoginLink sends link to the address.
	SendLoginLink(ctx context.Context, to, link string) error
}

// LoginLinkLogger is a LoginMailer that may write links to the server's log
// instead of mailing them, on a server without a mail server, so the page
// that asked for a link can say where it went.
type LoginLinkLogger interface {
	LoginMailer
	// LinksGoToLog reports whether links are written to the log, not
	// mailed.
	LinksGoToLog() bool
}

// LoginLinksGoToLog reports whether mailer writes sign-in links to the
// server's log rather than mailing them.
func LoginLinksGoToLog(mailer LoginMailer) bool {
	l, ok := mailer.(LoginLinkLogger)
	return ok && l.LinksGoToLog()
}

// ExternalIdentity is a person as an identity provider (GitHub, Google, an
// OpenID Connect issuer, or the e-mail link) vouches for them.
type ExternalIdentity struct {
	Provider      string // SignInGitHub, SignInGoogle, SignInOIDC or SignInEmail
	Subject       string // the provider's stable id for the person
	Email         string
	EmailVerified bool
}

// Validate checks that the identity can sign in: it needs a subject and a
// verified e-mail address, which is what joins identities into one account,
// and that address must not be the demo account's. Returns EUNAUTHORIZED
// otherwise.
func (id *ExternalIdentity) Validate() error {
	if id.Provider == "" || strings.TrimSpace(id.Subject) == "" {
		return Errorf(EUNAUTHORIZED, "The identity provider did not say who you are.")
	}
	if strings.TrimSpace(id.Email) == "" || !id.EmailVerified {
		return Errorf(EUNAUTHORIZED, "Your %s account has no verified e-mail address; verify one there, or sign in with an e-mail link.", SignInMethodLabel(id.Provider))
	}
	if _, err := NormalizeEmail(id.Email); err != nil {
		return Errorf(EUNAUTHORIZED, "The identity provider gave an e-mail address that is not valid.")
	}
	return CheckSignInEmail(id.Email)
}

// CheckEmailDomain returns EINVALID unless the (normalized) address's
// domain is a domain name that mail can reach on the internet: not a domain
// literal such as x@[10.0.0.5], which names a machine by its IP address, and
// not a name without a dot such as x@localhost, which names one on the
// server's own network, unless allowDotless (a development setting) lets
// those through. Sign-in links and invitations are sent only to addresses it
// accepts, so neither can be aimed at the server's neighbours.
func CheckEmailDomain(email string, allowDotless bool) error {
	at := strings.LastIndexByte(email, '@')
	domain := email[at+1:]
	switch {
	case at < 0 || domain == "":
		return Errorf(EINVALID, "%q is not a valid e-mail address.", email)
	case strings.HasPrefix(domain, "["):
		return Errorf(EINVALID, "%s names a machine by its IP address; use an address at a domain name, such as you@example.com.", email)
	case !strings.Contains(domain, ".") && !allowDotless:
		return Errorf(EINVALID, "%s is not at a full domain name (%s has no dot); use an address such as you@example.com.", email, domain)
	case strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, ".."):
		return Errorf(EINVALID, "%s is not at a full domain name; use an address such as you@example.com.", email)
	}
	return nil
}

// IdentityService links external identities to people.
type IdentityService interface {
	// SignInWithIdentity returns the person an identity signs in as. A
	// known identity keeps its person; a new one joins the person of its
	// verified e-mail, who is created when absent. A person who is a member
	// of no account gets an account of their own, as its owner, unless an
	// invitation for their address is pending: then they join by
	// accepting it.
	// Returns EUNAUTHORIZED for an identity that fails Validate or whose
	// address CheckEmailDomain refuses, and ErrDemoSignIn for one that
	// leads to the demo account.
	SignInWithIdentity(ctx context.Context, id ExternalIdentity) (*Person, error)
}
