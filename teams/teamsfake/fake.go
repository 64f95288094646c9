// Package teamsfake is a fake Bot Framework for tests, all on httptest:
// an OpenID metadata document and its key set, whose key signs the test
// tokens of the activities a test posts to the bot (rightly, or expired,
// for another audience or issuer, with a key the set does not hold, for
// another service URL); a token service answering the client-credentials
// flow; and a Bot Connector that records the activities posted and
// updated, answers members, and can answer 429.
package teamsfake

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/arbiterhq/arbiter/teams"
)

// Fake is a fake Bot Framework.
type Fake struct {
	// URL is the fake's root; MetadataURL its OpenID metadata, LoginURL
	// the token service's root (for teams.Tokens), ServiceURL the Bot
	// Connector's (an activity's serviceUrl), Issuer the tokens' issuer.
	URL, MetadataURL, LoginURL, ServiceURL, Issuer string
	srv                                            *httptest.Server

	mu        sync.Mutex
	keys      []signingKey
	bots      map[string]string // app id → client secret
	tokens    map[string]time.Time
	tokenAsks int
	expiresIn int
	members   map[string]teams.Member // user id → member
	posted    []Posted
	updates   []Posted
	limited   map[string][]time.Duration
	throttled []Throttled
	failures  map[string][]int
	changed   chan struct{}
	seq       int
}

type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

// Posted is an activity the Bot Connector received.
type Posted struct {
	Conversation, ActivityID string
	Activity                 teams.Activity
	// Raw is the activity's JSON as posted.
	Raw string
	At  time.Time
}

// Throttled is a Bot Connector call answered 429.
type Throttled struct {
	Method string
	At     time.Time
}

// New starts a fake Bot Framework, closed when the test ends.
func New(t testing.TB) *Fake {
	t.Helper()
	f := &Fake{bots: map[string]string{}, tokens: map[string]time.Time{}, expiresIn: 3600, members: map[string]teams.Member{},
		limited: map[string][]time.Duration{}, failures: map[string][]int{}, changed: make(chan struct{})}
	f.RotateKey(t)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL
	f.MetadataURL = f.URL + "/v1/.well-known/openidconfiguration"
	f.LoginURL = f.URL + "/login"
	f.ServiceURL = f.URL + "/connector/"
	f.Issuer = teams.DefaultIssuer
	return f
}

// AddBot makes the token service know a bot's client secret.
func (f *Fake) AddBot(appID, secret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bots[appID] = secret
}

// AddMember makes the Bot Connector know a Teams user.
func (f *Fake) AddMember(m teams.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[m.ID] = m
}

// ExpiresIn sets the lifetime, in seconds, of the access tokens issued
// from now on.
func (f *Fake) ExpiresIn(seconds int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expiresIn = seconds
}

// RotateKey adds a new signing key to the key set, which signs the
// tokens from now on (the old ones stay in the set).
func (f *Fake) RotateKey(t testing.TB) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, signingKey{kid: fmt.Sprintf("key-%d", len(f.keys)+1), key: k})
}

// TokenAsks returns how many access tokens were asked for.
func (f *Fake) TokenAsks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenAsks
}

// RateLimit makes the next Bot Connector call of method (POST, PUT, GET)
// answer 429 with Retry-After.
func (f *Fake) RateLimit(method string, retryAfter time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limited[method] = append(f.limited[method], retryAfter)
}

// Throttled returns the calls answered 429 so far.
func (f *Fake) Throttled() []Throttled {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Throttled(nil), f.throttled...)
}

// Fail makes the next Bot Connector call of method answer status.
func (f *Fake) Fail(method string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], status)
}

// TokenOption changes a test token from a right one.
type TokenOption func(*tokenSpec)

type tokenSpec struct {
	claims  jwt.MapClaims
	foreign bool
}

// Expired makes the token expired for d.
func Expired(d time.Duration) TokenOption {
	return func(s *tokenSpec) {
		s.claims["exp"] = time.Now().Add(-d).Unix()
		s.claims["nbf"] = time.Now().Add(-d - time.Hour).Unix()
	}
}

// Audience makes the token for another app.
func Audience(aud string) TokenOption { return func(s *tokenSpec) { s.claims["aud"] = aud } }

// Issuer makes the token another issuer's.
func Issuer(iss string) TokenOption { return func(s *tokenSpec) { s.claims["iss"] = iss } }

// ServiceURL makes the token name another service URL.
func ServiceURL(u string) TokenOption { return func(s *tokenSpec) { s.claims["serviceurl"] = u } }

// ForeignKey signs the token with a key the key set does not hold, under
// the current key's id.
func ForeignKey() TokenOption { return func(s *tokenSpec) { s.foreign = true } }

// Token returns a bearer token of the Bot Framework for the bot appID and
// the fake's service URL, changed by opts.
func (f *Fake) Token(t testing.TB, appID string, opts ...TokenOption) string {
	t.Helper()
	now := time.Now()
	s := &tokenSpec{claims: jwt.MapClaims{"iss": f.Issuer, "aud": appID, "serviceurl": f.ServiceURL,
		"nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}}
	for _, o := range opts {
		o(s)
	}
	f.mu.Lock()
	k := f.keys[len(f.keys)-1]
	f.mu.Unlock()
	key := k.key
	if s.foreign {
		var err error
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, s.claims)
	tok.Header["kid"] = k.kid
	signed, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + signed
}

// Send posts the activity to the bot's endpoint with the authorization
// given (Token's, or anything) and returns the answer's status and body.
func (f *Fake) Send(t testing.TB, endpoint, authorization string, a *teams.Activity) (int, []byte) {
	t.Helper()
	if a.ServiceURL == "" {
		a.ServiceURL = f.ServiceURL
	}
	if a.ChannelID == "" {
		a.ChannelID = "msteams"
	}
	body, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Posted returns the activities posted to conversations so far.
func (f *Fake) Posted() []Posted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Posted(nil), f.posted...)
}

// Updates returns the activity updates so far.
func (f *Fake) Updates() []Posted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Posted(nil), f.updates...)
}

// WaitPosted waits until n activities were posted, or fails the test
// after 30 s, and returns them.
func (f *Fake) WaitPosted(t testing.TB, n int) []Posted {
	t.Helper()
	return f.wait(t, n, "posts", func() []Posted { return f.posted })
}

// WaitUpdates waits until n activities were updated, or fails the test
// after 30 s, and returns the updates.
func (f *Fake) WaitUpdates(t testing.TB, n int) []Posted {
	t.Helper()
	return f.wait(t, n, "updates", func() []Posted { return f.updates })
}

func (f *Fake) wait(t testing.TB, n int, what string, list func() []Posted) []Posted {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		got := append([]Posted(nil), list()...)
		ch := f.changed
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waited 30 s for %d %s; got %d", n, what, len(got))
		}
	}
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/.well-known/openidconfiguration":
		writeJSON(w, http.StatusOK, map[string]any{"issuer": f.Issuer, "jwks_uri": f.URL + "/v1/.well-known/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	case r.URL.Path == "/v1/.well-known/keys":
		f.serveKeys(w)
	case strings.HasPrefix(r.URL.Path, "/login/") && strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token"):
		f.serveToken(w, r)
	case strings.HasPrefix(r.URL.Path, "/connector/v3/conversations/"):
		f.serveConnector(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *Fake) serveKeys(w http.ResponseWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []map[string]any
	for _, k := range f.keys {
		keys = append(keys, map[string]any{"kty": "RSA", "use": "sig", "kid": k.kid, "alg": "RS256",
			"n":            base64.RawURLEncoding.EncodeToString(k.key.N.Bytes()),
			"e":            base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.key.E)).Bytes()),
			"endorsements": []string{"msteams"}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

func (f *Fake) serveToken(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokenAsks++
	secret, ok := f.bots[r.PostForm.Get("client_id")]
	if !ok || secret != r.PostForm.Get("client_secret") || r.PostForm.Get("grant_type") != "client_credentials" ||
		r.PostForm.Get("scope") != teams.BotScope {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})
		return
	}
	f.seq++
	token := fmt.Sprintf("access-%d", f.seq)
	f.tokens[token] = time.Now().Add(time.Duration(f.expiresIn) * time.Second)
	writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": f.expiresIn, "access_token": token})
}

func (f *Fake) serveConnector(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/connector/v3/conversations/")
	parts := strings.Split(rest, "/")
	for i := range parts {
		parts[i], _ = url.PathUnescape(parts[i])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if exp, ok := f.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]; !ok || time.Now().After(exp) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "Unauthorized"}})
		return
	}
	if q := f.limited[r.Method]; len(q) > 0 {
		f.limited[r.Method] = q[1:]
		f.throttled = append(f.throttled, Throttled{Method: r.Method, At: time.Now()})
		w.Header().Set("Retry-After", strconv.Itoa(int(q[0].Seconds())))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"code": "TooManyRequests"}})
		return
	}
	if q := f.failures[r.Method]; len(q) > 0 {
		f.failures[r.Method] = q[1:]
		writeJSON(w, q[0], map[string]any{"error": map[string]any{"code": http.StatusText(q[0])}})
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "activities":
		var a teams.Activity
		if json.Unmarshal(body, &a) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "BadArgument"}})
			return
		}
		f.seq++
		id := fmt.Sprintf("1700000000%06d", f.seq)
		f.posted = append(f.posted, Posted{Conversation: parts[0], ActivityID: id, Activity: a, Raw: string(body), At: time.Now()})
		f.notify()
		writeJSON(w, http.StatusCreated, map[string]any{"id": id})
	case r.Method == http.MethodPut && len(parts) == 3 && parts[1] == "activities":
		var a teams.Activity
		if json.Unmarshal(body, &a) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "BadArgument"}})
			return
		}
		known := false
		for _, p := range f.posted {
			known = known || p.Conversation == parts[0] && p.ActivityID == parts[2]
		}
		if !known {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": "ActivityNotFoundInConversation"}})
			return
		}
		f.updates = append(f.updates, Posted{Conversation: parts[0], ActivityID: parts[2], Activity: a, Raw: string(body), At: time.Now()})
		f.notify()
		writeJSON(w, http.StatusOK, map[string]any{"id": parts[2]})
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "members":
		m, ok := f.members[parts[2]]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": "MemberNotFoundInConversation"}})
			return
		}
		writeJSON(w, http.StatusOK, m)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": "NotFound"}})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
