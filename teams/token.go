package teams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// The bot's outgoing calls carry an access token of the client-credentials
// flow, from the tenant's token endpoint, for the Bot Framework's scope.
const (
	DefaultLoginURL = "https://login.microsoftonline.com"
	BotScope        = "https://api.botframework.com/.default"
	// tokenEarly is how long before its expiry a token is replaced.
	tokenEarly = 5 * time.Minute
)

// Tokens hands out the bots' access tokens: one cached token per bot and
// secret, used until tokenEarly before it expires, and replaced by one
// request at a time however many calls need it then (oauth2's
// ReuseTokenSource holds its lock while it asks). LoginURL is the token
// service's root (DefaultLoginURL; tests point it at a fake).
type Tokens struct {
	LoginURL string
	HTTP     *http.Client

	mu      sync.Mutex
	sources map[string]oauth2.TokenSource
}

// Token returns an access token of the bot appID in tenant. A request
// for a new one is bounded by the HTTP client's timeout.
func (t *Tokens) Token(tenant, appID, secret string) (string, error) {
	tok, err := t.source(tenant, appID, secret).Token()
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// source returns the bot's cached token source, made on first use; a new
// secret makes a new one.
func (t *Tokens) source(tenant, appID, secret string) oauth2.TokenSource {
	sum := sha256.Sum256([]byte(tenant + "\x00" + appID + "\x00" + secret))
	key := hex.EncodeToString(sum[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sources[key]; ok {
		return s
	}
	if t.sources == nil {
		t.sources = map[string]oauth2.TokenSource{}
	}
	root := t.LoginURL
	if root == "" {
		root = DefaultLoginURL
	}
	cfg := clientcredentials.Config{ClientID: appID, ClientSecret: secret, Scopes: []string{BotScope},
		TokenURL: strings.TrimSuffix(root, "/") + "/" + tenant + "/oauth2/v2.0/token", AuthStyle: oauth2.AuthStyleInParams}
	hc := t.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: ClientTimeout}
	}
	// The source outlives any one call: its context carries only the
	// HTTP client.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
	s := oauth2.ReuseTokenSourceWithExpiry(nil, cfg.TokenSource(ctx), tokenEarly)
	t.sources[key] = s
	return s
}

// Forget drops the cached tokens of a bot whose secret changed or which
// was disconnected.
func (t *Tokens) Forget(tenant, appID, secret string) {
	sum := sha256.Sum256([]byte(tenant + "\x00" + appID + "\x00" + secret))
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sources, hex.EncodeToString(sum[:]))
}

// Check asks the token service for the bot's token, which it then keeps:
// an error says the credentials are refused (Permanent) or the service
// was not reached.
func (t *Tokens) Check(tenant, appID, secret string) error {
	_, err := t.Token(tenant, appID, secret)
	return err
}
