package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// The Bot Framework's channel-to-bot authentication: Teams signs each
// activity it posts to the bot with a key from the OpenID metadata below
// (its jwks_uri), as issuer DefaultIssuer, for the bot's app id.
const (
	DefaultOpenIDMetadataURL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
	DefaultIssuer            = "https://api.botframework.com"
	// DefaultLeeway is how far past its expiry (or before its start) a
	// token is still taken: clocks differ a little.
	DefaultLeeway = time.Minute
	// metadataMaxAge is how long the OpenID metadata is used before it
	// is read again; the keys themselves are refreshed hourly, and at
	// once (at most every five minutes) for a key id not seen.
	metadataMaxAge = 24 * time.Hour
)

// signingMethods are the algorithms the Bot Framework signs with.
var signingMethods = []string{"RS256", "RS384", "RS512"}

// Errors of Verify. ErrUnauthorized's are the token's fault (401); the
// others, the Bot Framework's keys being out of reach (503).
var (
	ErrUnauthorized   = errors.New("teams: the request's token is not the Bot Framework's")
	ErrKeysOutOfReach = errors.New("teams: the Bot Framework's signing keys cannot be read")
)

// Claims is what a verified token says.
type Claims struct {
	// Audience is the app ids the token was issued for: the bot's.
	Audience []string
	// ServiceURL is the Bot Connector the activity came through.
	ServiceURL string
}

// tokenClaims are the claims of a Bot Framework token.
type tokenClaims struct {
	jwt.RegisteredClaims
	ServiceURL string `json:"serviceurl"`
}

// Verifier checks the bearer tokens of the activities posted to the bot:
// signed by a key of the OpenID metadata's key set (read once, then
// cached and refreshed by keyfunc), with an RS algorithm, by Issuer,
// unexpired within Leeway, and naming the activity's service URL. The
// audience, the bot's app id, is for the caller to match against a
// connection. The zero Verifier uses Microsoft's endpoints; tests point
// MetadataURL and Issuer at a fake.
type Verifier struct {
	MetadataURL string
	Issuer      string
	Leeway      time.Duration
	HTTP        *http.Client

	mu      sync.Mutex
	keys    keyfunc.Keyfunc
	jwksURL string
	read    time.Time
	stop    context.CancelFunc
}

// Close stops refreshing the keys.
func (v *Verifier) Close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stop != nil {
		v.stop()
		v.stop = nil
	}
}

// Verify checks the Authorization header of an activity that names
// serviceURL, and returns the token's claims; ErrUnauthorized (wrapped,
// saying why) for a token that is missing, malformed, badly signed, of
// another issuer, expired or of another service URL; ErrKeysOutOfReach
// when the keys cannot be read.
func (v *Verifier) Verify(ctx context.Context, authorization, serviceURL string) (*Claims, error) {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || raw == "" || len(raw) > 16<<10 {
		return nil, fmt.Errorf("%w: no bearer token", ErrUnauthorized)
	}
	keys, err := v.keyfunc(ctx)
	if err != nil {
		return nil, err
	}
	issuer := v.Issuer
	if issuer == "" {
		issuer = DefaultIssuer
	}
	leeway := v.Leeway
	if leeway <= 0 {
		leeway = DefaultLeeway
	}
	var c tokenClaims
	if _, err := jwt.ParseWithClaims(raw, &c, keys.KeyfuncCtx(ctx), jwt.WithValidMethods(signingMethods),
		jwt.WithIssuer(issuer), jwt.WithExpirationRequired(), jwt.WithLeeway(leeway)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	if len(c.Audience) == 0 {
		return nil, fmt.Errorf("%w: no audience", ErrUnauthorized)
	}
	if c.ServiceURL == "" || c.ServiceURL != serviceURL {
		return nil, fmt.Errorf("%w: the token is for another service URL", ErrUnauthorized)
	}
	return &Claims{Audience: c.Audience, ServiceURL: c.ServiceURL}, nil
}

// keyfunc returns the key set's keyfunc, reading the OpenID metadata
// when it has not been, or was read more than metadataMaxAge ago. One
// caller reads it at a time; the others wait for it.
func (v *Verifier) keyfunc(ctx context.Context) (keyfunc.Keyfunc, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys != nil && time.Since(v.read) < metadataMaxAge {
		return v.keys, nil
	}
	jwksURL, err := v.readMetadata(ctx)
	if err != nil {
		if v.keys != nil {
			return v.keys, nil // keep the keys we have until the metadata is back
		}
		return nil, fmt.Errorf("%w: %v", ErrKeysOutOfReach, err)
	}
	v.read = time.Now()
	if v.keys != nil && jwksURL == v.jwksURL {
		return v.keys, nil
	}
	kctx, stop := context.WithCancel(context.Background())
	keys, err := keyfunc.NewDefaultOverrideCtx(kctx, []string{jwksURL}, keyfunc.Override{
		Client: v.client(),
		// A key id not seen refreshes the set at most every five
		// minutes; a request never waits for its turn (a tenth of a
		// second at most, the limiter's own bookkeeping).
		RefreshUnknownKID: rate.NewLimiter(rate.Every(5*time.Minute), 1),
		RateLimitWaitMax:  100 * time.Millisecond,
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(context.Context, error) {}
		},
	})
	if err != nil {
		stop()
		if v.keys != nil {
			return v.keys, nil
		}
		return nil, fmt.Errorf("%w: %v", ErrKeysOutOfReach, err)
	}
	if v.stop != nil {
		v.stop()
	}
	v.keys, v.jwksURL, v.stop = keys, jwksURL, stop
	return keys, nil
}

// readMetadata returns the key set's address from the OpenID metadata.
func (v *Verifier) readMetadata(ctx context.Context) (string, error) {
	u := v.MetadataURL
	if u == "" {
		u = DefaultOpenIDMetadataURL
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := v.client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the OpenID metadata answered %d", resp.StatusCode)
	}
	var m struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&m); err != nil {
		return "", fmt.Errorf("read the OpenID metadata: %w", err)
	}
	if !strings.HasPrefix(m.JWKSURI, "https://") && !strings.HasPrefix(m.JWKSURI, "http://") {
		return "", errors.New("the OpenID metadata names no key set")
	}
	return m.JWKSURI, nil
}

func (v *Verifier) client() *http.Client {
	if v.HTTP != nil {
		return v.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second}
}
