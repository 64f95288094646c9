package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"hash"
	"net/http"
	"time"

	"github.com/gorilla/sessions"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
)

// Cookie names and lifetimes.
const (
	sessionCookieName = "arbiter_session"
	oauthCookieName   = "arbiter_oauth"
	// oauthStateTTL bounds the time between leaving for an identity
	// provider and coming back.
	oauthStateTTL = 10 * time.Minute
)

// Sessions signs people in to the dashboard and the reviewer site. The
// session cookie (gorilla/sessions, signed and encrypted, HttpOnly,
// SameSite=Lax) holds a random token; the store holds its hash, so signing
// out ends the session even for a copied cookie.
type Sessions struct {
	store   arbiter.SessionService
	cookies *sessions.CookieStore // the session token
	oauth   *sessions.CookieStore // an OAuth flow in progress
	// Idle is how long the store lets a session go unused
	// (ARBITER_SESSION_IDLE_TIMEOUT), for the pages that say so; 0 means
	// arbiter.DefaultSessionIdle.
	Idle time.Duration
}

// IdleLimit returns how long a session may go unused.
func (s *Sessions) IdleLimit() time.Duration {
	if s.Idle <= 0 {
		return arbiter.DefaultSessionIdle
	}
	return s.Idle
}

// NewSessions returns the session layer over the store. secret keys the
// cookies (see arbiter.SessionService.SessionSecret); secure marks them
// Secure, for an https dashboard; domain, when set, shares them with sibling
// hosts.
func NewSessions(store arbiter.SessionService, secret string, secure bool, domain string) *Sessions {
	hashKey := hmacOf(sha512.New, secret, "arbiter session cookie signature")
	blockKey := hmacOf(sha256.New, secret, "arbiter session cookie encryption")
	newStore := func(maxAge time.Duration) *sessions.CookieStore {
		cs := sessions.NewCookieStore(hashKey, blockKey)
		cs.Options = &sessions.Options{
			Path: "/", Domain: domain, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
		}
		cs.MaxAge(int(maxAge / time.Second))
		return cs
	}
	return &Sessions{store: store, cookies: newStore(arbiter.SessionTTL), oauth: newStore(oauthStateTTL)}
}

// hmacOf derives a key for one purpose from the secret.
func hmacOf(h func() hash.Hash, secret, purpose string) []byte {
	m := hmac.New(h, []byte(secret))
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Load is middleware that puts the request's session, if its cookie names a
// live one, in the context. A missing, forged or ended session is no
// session.
func (s *Sessions) Load(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := s.token(r)
		if token == "" {
			next.ServeHTTP(w, r)
			return
		}
		session, err := s.store.FindSessionByToken(r.Context(), token)
		switch arbiter.ErrorCode(err) {
		case "":
			ctx := arbiter.NewContextWithSession(r.Context(), session)
			r = r.WithContext(arbiter.NewContextWithAccountID(ctx, session.AccountID))
		case arbiter.EUNAUTHORIZED:
		default:
			handlers.Error(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// token returns the session token of the request's cookie, or "".
func (s *Sessions) token(r *http.Request) string {
	c, err := s.cookies.Get(r, sessionCookieName)
	if err != nil {
		return ""
	}
	token, _ := c.Values["token"].(string)
	return token
}

// SignIn starts a session for the person, replacing the request's own,
// and sets its cookie.
func (s *Sessions) SignIn(w http.ResponseWriter, r *http.Request, personID, method string) error {
	if old := s.token(r); old != "" {
		if err := s.store.DeleteSession(r.Context(), old); err != nil {
			return err
		}
	}
	_, token, err := s.store.CreateSession(r.Context(), personID, method, handlers.ClientOf(r))
	if err != nil {
		return err
	}
	c, _ := s.cookies.New(r, sessionCookieName)
	c.Values["token"] = token
	return c.Save(r, w)
}

// SwitchAccount makes the account the current one of the request's session.
func (s *Sessions) SwitchAccount(r *http.Request, accountID string) error {
	token := s.token(r)
	if token == "" {
		return errSignInFirst
	}
	return s.store.SwitchAccount(r.Context(), token, accountID)
}

// SignOut ends the request's session and clears its cookie.
func (s *Sessions) SignOut(w http.ResponseWriter, r *http.Request) error {
	if token := s.token(r); token != "" {
		if err := s.store.DeleteSession(r.Context(), token); err != nil {
			return err
		}
	}
	c, _ := s.cookies.New(r, sessionCookieName)
	c.Options.MaxAge = -1
	return c.Save(r, w)
}

// SignOutEverywhere ends every session of the request's person, on every
// device, and clears this one's cookie. It returns how many sessions it
// ended.
func (s *Sessions) SignOutEverywhere(w http.ResponseWriter, r *http.Request) (int, error) {
	session := arbiter.SessionFromContext(r.Context())
	if session == nil {
		return 0, errSignInFirst
	}
	n, err := s.store.DeletePersonSessions(r.Context(), session.PersonID)
	if err != nil {
		return 0, err
	}
	c, _ := s.cookies.New(r, sessionCookieName)
	c.Options.MaxAge = -1
	return n, c.Save(r, w)
}

// SaveOAuthState keeps an OAuth flow's state in its own short-lived cookie.
func (s *Sessions) SaveOAuthState(w http.ResponseWriter, r *http.Request, st handlers.OAuthState) error {
	c, _ := s.oauth.New(r, oauthCookieName)
	c.Values["provider"], c.Values["state"], c.Values["session"], c.Values["next"] = st.Provider, st.State, st.Session, st.Next
	return c.Save(r, w)
}

var errNoOAuthState = errors.New("no OAuth flow in progress")

// TakeOAuthState returns the flow's state and clears its cookie, so a state
// serves one callback only.
func (s *Sessions) TakeOAuthState(w http.ResponseWriter, r *http.Request) (handlers.OAuthState, error) {
	c, err := s.oauth.Get(r, oauthCookieName)
	if err != nil || c.IsNew {
		return handlers.OAuthState{}, errNoOAuthState
	}
	var st handlers.OAuthState
	st.Provider, _ = c.Values["provider"].(string)
	st.State, _ = c.Values["state"].(string)
	st.Session, _ = c.Values["session"].(string)
	st.Next, _ = c.Values["next"].(string)
	c.Options.MaxAge = -1
	if err := c.Save(r, w); err != nil {
		return handlers.OAuthState{}, err
	}
	if st.State == "" {
		return handlers.OAuthState{}, errNoOAuthState
	}
	return st, nil
}

// requireSession is middleware for pages that need a signed-in person: a
// page request without a session is sent to sign in and back; any other
// request is refused.
func requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arbiter.SessionFromContext(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, handlers.SignInAndBack(r), http.StatusSeeOther)
			return
		}
		handlers.Error(w, r, errSignInFirst)
	})
}

var errSignInFirst = arbiter.Errorf(arbiter.EUNAUTHORIZED, "Sign in first: your session has ended.")

// errNoAccount answers a signed-in person who is a member of no account.
var errNoAccount = arbiter.Errorf(arbiter.ENOTFOUND, "You are not a member of any account. If someone invited you, open the link in their invitation mail; otherwise ask an account's owner to invite you.")

// requireAccount is middleware, after requireSession, for pages of an
// account: a person who is a member of none gets a page that says so.
func requireAccount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := arbiter.SessionFromContext(r.Context()); s == nil || s.AccountID == "" {
			handlers.Error(w, r, errNoAccount)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allow returns middleware, after requireAccount, that lets through the
// members whose role may do the action (arbiter.Can) and answers everyone
// else as if the page did not exist.
func allow(action arbiter.Action) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s := arbiter.SessionFromContext(r.Context()); s == nil || !arbiter.Can(s.Role, action) {
				handlers.Error(w, r, arbiter.ErrNotAllowed)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
