package web_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/markbates/goth/providers/github"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/web"
)

// fakeGitHub is GitHub's OAuth endpoints and API, as far as sign-in uses
// them. deny makes the authorize step answer as a person who refused.
type fakeGitHub struct {
	*httptest.Server
	mu       sync.Mutex
	deny     bool
	verified bool
	codes    map[string]bool
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{verified: true, codes: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, _ := url.Parse(q.Get("redirect_uri"))
		params := url.Values{"state": {q.Get("state")}}
		g.mu.Lock()
		if q.Get("client_id") != "gh-client" {
			params.Set("error", "invalid_client")
		} else if g.deny {
			params.Set("error", "access_denied")
		} else {
			code := arbiter.NewID("code_", 8)
			g.codes[code] = true
			params.Set("code", code)
		}
		g.mu.Unlock()
		back.RawQuery = params.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		g.mu.Lock()
		valid := g.codes[r.PostForm.Get("code")]
		delete(g.codes, r.PostForm.Get("code"))
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if id != "gh-client" || secret != "gh-secret" || !valid {
			json.NewEncoder(w).Encode(map[string]string{"error": "bad_verification_code"})
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"access_token": "gho_token", "token_type": "bearer", "scope": "user:email"})
	})
	mux.HandleFunc("GET /user", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer gho_token" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": 583231, "login": "octocat", "name": "The Octocat", "email": null}`))
	})
	mux.HandleFunc("GET /user/emails", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		g.mu.Lock()
		verified := g.verified
		g.mu.Unlock()
		json.NewEncoder(w).Encode([]map[string]any{
			{"email": "octo-old@example.com", "primary": false, "verified": true},
			{"email": "octocat@example.com", "primary": true, "verified": verified},
		})
	})
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	return g
}

// withGitHub offers sign-in with the fake GitHub.
func withGitHub(g *fakeGitHub) func(d *dash) {
	return func(d *dash) {
		p := github.NewCustomisedURL("gh-client", "gh-secret", d.url+"/auth/github/callback",
			g.URL+"/login/oauth/authorize", g.URL+"/login/oauth/access_token", g.URL+"/user", g.URL+"/user/emails", "user:email")
		d.router.Providers = append(d.router.Providers, web.GitHubProvider(p))
	}
}

// startOAuth follows the sign-in button to the provider and back, stopping
// at the callback's answer.
func (b *browser) startOAuth(provider string) response {
	b.t.Helper()
	r := b.get("/auth/" + provider)
	wantStatus(b.t, r, http.StatusFound)
	r = b.get(r.header.Get("Location")) // the provider
	if r.status != http.StatusFound {
		b.t.Fatalf("the provider answered %d: %s", r.status, r.body)
	}
	return b.get(r.header.Get("Location")) // the callback
}

func TestGitHubSignIn(t *testing.T) {
	t.Parallel()
	g := newFakeGitHub(t)
	eachDash(t, withGitHub(g), func(t *testing.T, d *dash) {
		b := d.browser()
		page := b.get("/signin")
		if !strings.Contains(page.body, `data-testid="sign-in-github"`) || strings.Contains(page.body, "sign-in-google") {
			t.Fatalf("the sign-in page should offer GitHub alone:\n%s", page.body)
		}
		r := b.get("/auth/github")
		wantStatus(t, r, http.StatusFound)
		to, _ := url.Parse(r.header.Get("Location"))
		if !strings.HasPrefix(to.String(), g.URL+"/login/oauth/authorize") || to.Query().Get("state") == "" ||
			to.Query().Get("redirect_uri") != d.url+"/auth/github/callback" || to.Query().Get("scope") != "user:email" {
			t.Fatalf("sent to %s", to)
		}
		r = b.get(b.get(to.String()).header.Get("Location"))
		wantStatus(t, r, http.StatusSeeOther)
		if !b.signedIn() {
			t.Fatal("not signed in after GitHub said yes")
		}
		home := b.get("/")
		if !strings.Contains(home.body, "octocat@example.com") {
			t.Errorf("signed in as someone else:\n%s", home.body)
		}
		account, err := d.store.FindAccountByEmail(ctx, "octocat@example.com")
		if err != nil {
			t.Fatal(err)
		}
		events, _ := d.store.ListAuditEvents(ctx, account.ID, 10)
		if len(events) != 1 || events[0].Detail != arbiter.SignInGitHub {
			t.Errorf("audit = %+v, want one GitHub sign-in", events)
		}

		// The same verified address by e-mail link is the same account.
		b.post("/keys", url.Values{"name": {"made with github"}})
		byMail := d.browser()
		byMail.signIn("octocat@example.com")
		if !strings.Contains(byMail.get("/keys").body, "made with github") {
			t.Error("the e-mail sign-in with GitHub's verified address reached another account")
		}
		// And GitHub again finds the same account by its subject.
		again := d.browser()
		wantStatus(t, again.startOAuth("github"), http.StatusSeeOther)
		if !strings.Contains(again.get("/keys").body, "made with github") {
			t.Error("a second GitHub sign-in reached another account")
		}
	})
}

func TestGitHubSignIn_Refused(t *testing.T) {
	t.Parallel()
	g := newFakeGitHub(t)
	eachDash(t, withGitHub(g), func(t *testing.T, d *dash) {
		t.Run("StateMismatch", func(t *testing.T) {
			b := d.browser()
			r := b.get("/auth/github")
			to, _ := url.Parse(r.header.Get("Location"))
			back, _ := url.Parse(b.get(to.String()).header.Get("Location"))
			q := back.Query()
			q.Set("state", arbiter.NewSecretToken())
			back.RawQuery = q.Encode()
			r = b.get(back.String())
			wantStatus(t, r, http.StatusUnauthorized)
			if !strings.Contains(r.body, `data-testid="error-page"`) || !strings.Contains(r.body, "could not be verified") {
				t.Errorf("a state mismatch answered:\n%s", r.body)
			}
			if b.signedIn() {
				t.Fatal("a state mismatch signed in")
			}
		})
		t.Run("NoStateCookie", func(t *testing.T) {
			// The callback arrives in a browser that never started the flow
			// (a login CSRF attempt).
			starter := d.browser()
			to, _ := url.Parse(starter.get("/auth/github").header.Get("Location"))
			callback := starter.get(to.String()).header.Get("Location")
			victim := d.browser()
			wantStatus(t, victim.get(callback), http.StatusUnauthorized)
			if victim.signedIn() {
				t.Fatal("a callback without the state cookie signed in")
			}
		})
		t.Run("ConsentDenied", func(t *testing.T) {
			g.mu.Lock()
			g.deny = true
			g.mu.Unlock()
			defer func() { g.mu.Lock(); g.deny = false; g.mu.Unlock() }()
			b := d.browser()
			r := b.startOAuth("github")
			wantStatus(t, r, http.StatusUnauthorized)
			if !strings.Contains(r.body, `data-testid="error-page"`) || !strings.Contains(r.body, "did not allow Arbiter") {
				t.Errorf("a denied consent answered:\n%s", r.body)
			}
			if b.signedIn() {
				t.Fatal("a denied consent signed in")
			}
		})
		t.Run("StateUsedTwice", func(t *testing.T) {
			b := d.browser()
			to, _ := url.Parse(b.get("/auth/github").header.Get("Location"))
			callback := b.get(to.String()).header.Get("Location")
			wantStatus(t, b.get(callback), http.StatusSeeOther)
			b.post("/signout", url.Values{})
			wantStatus(t, b.get(callback), http.StatusUnauthorized)
			if b.signedIn() {
				t.Fatal("a replayed callback signed in")
			}
		})
		t.Run("UnverifiedEmail", func(t *testing.T) {
			g.mu.Lock()
			g.verified = false
			g.mu.Unlock()
			defer func() { g.mu.Lock(); g.verified = true; g.mu.Unlock() }()
			b := d.browser()
			wantStatus(t, b.startOAuth("github"), http.StatusUnauthorized)
			if b.signedIn() {
				t.Fatal("a GitHub account without a verified address signed in")
			}
		})
	})
}

// startMockOIDC runs an OpenID Connect provider in the test process.
// mockoidc's userinfo answer lacks the "sub" claim that OpenID Connect
// requires (and goth checks), so a middleware adds the session's subject.
func startMockOIDC(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/userinfo") {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var info map[string]any
			token, err := m.Keypair.VerifyJWT(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), m.Now)
			var session *mockoidc.Session
			if err == nil {
				session, err = m.SessionStore.GetSessionByToken(token)
			}
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &info) != nil || err != nil {
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
			info["sub"] = session.User.ID()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(info)
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return m
}

func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	m := startMockOIDC(t)
	withOIDC := func(d *dash) {
		cfg := m.Config()
		d.router.Providers = append(d.router.Providers, web.OIDCProvider(m.Issuer(), cfg.ClientID, cfg.ClientSecret, d.url+"/auth/oidc/callback"))
	}
	eachDash(t, withOIDC, func(t *testing.T, d *dash) {
		b := d.browser()
		if page := b.get("/signin"); !strings.Contains(page.body, `data-testid="sign-in-oidc"`) {
			t.Fatalf("the sign-in page does not offer OpenID Connect:\n%s", page.body)
		}
		m.QueueUser(&mockoidc.MockUser{Subject: "oidc-7", Email: "Jane.Doe@Example.com", EmailVerified: true})
		r := b.startOAuth("oidc")
		wantStatus(t, r, http.StatusSeeOther)
		if !b.signedIn() || !strings.Contains(b.get("/").body, "jane.doe@example.com") {
			t.Fatal("not signed in as jane.doe@example.com after the issuer said yes")
		}
		account, err := d.store.FindAccountByEmail(ctx, "jane.doe@example.com")
		if err != nil {
			t.Fatal(err)
		}
		events, _ := d.store.ListAuditEvents(ctx, account.ID, 10)
		if len(events) != 1 || events[0].Detail != arbiter.SignInOIDC {
			t.Errorf("audit = %+v, want one OIDC sign-in", events)
		}

		// An unverified address does not sign in (it could take over the
		// account of whoever owns it).
		other := d.browser()
		m.QueueUser(&mockoidc.MockUser{Subject: "oidc-8", Email: "jane.doe@example.com", EmailVerified: false})
		r = other.startOAuth("oidc")
		wantStatus(t, r, http.StatusUnauthorized)
		if !strings.Contains(r.body, "no verified e-mail address") || other.signedIn() {
			t.Errorf("an unverified address answered:\n%s", r.body)
		}

		// The issuer sends the person back with access_denied: the error
		// page, no session.
		denied := d.browser()
		to, _ := url.Parse(denied.get("/auth/oidc").header.Get("Location"))
		r = denied.get("/auth/oidc/callback?" + url.Values{"error": {"access_denied"}, "state": {to.Query().Get("state")}}.Encode())
		wantStatus(t, r, http.StatusUnauthorized)
		if !strings.Contains(r.body, "did not allow Arbiter") || denied.signedIn() {
			t.Errorf("a denied consent answered:\n%s", r.body)
		}
	})
}

func TestOIDCProvider_IssuerDown(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	eachDash(t, func(d *dash) {
		d.router.Providers = []handlers.OAuthProvider{web.OIDCProvider(down.URL, "id", "secret", d.url+"/auth/oidc/callback")}
	}, func(t *testing.T, d *dash) {
		b := d.browser()
		r := b.get("/auth/oidc")
		wantStatus(t, r, http.StatusServiceUnavailable)
		if !strings.Contains(r.body, "cannot be reached") {
			t.Errorf("an unreachable issuer answered:\n%s", r.body)
		}
	})
}

func TestConfigFromEnv_DashboardSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c, err := config.FromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if warnings := c.DeriveOrigins("[::]:8080"); len(warnings) != 0 || c.BaseURL != "http://localhost:8080" || c.AppURL != c.BaseURL || c.ReviewURL != c.BaseURL {
		t.Fatalf("default origins = %+v, warnings %q", c, warnings)
	}
	if ps := web.Providers(c); len(ps) != 0 {
		t.Errorf("%d providers offered without configuration", len(ps))
	}

	env = map[string]string{
		"ARBITER_APP_URL":              "https://App.Example.com/",
		"ARBITER_GITHUB_CLIENT_ID":     "id",
		"ARBITER_GITHUB_CLIENT_SECRET": "secret",
		"ARBITER_GOOGLE_CLIENT_ID":     "id", // no secret: not offered
		"ARBITER_OIDC_ISSUER":          "https://sso.example.com/",
		"ARBITER_OIDC_CLIENT_ID":       "id",
		"ARBITER_OIDC_CLIENT_SECRET":   "secret",
	}
	c, err = config.FromEnv(getenv)
	if err != nil || c.AppURL != "https://app.example.com" || c.OIDC.Issuer != "https://sso.example.com" {
		t.Fatalf("config = %+v, %v", c, err)
	}
	var names []string
	for _, p := range web.Providers(c) {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "github,oidc" {
		t.Errorf("providers = %v, want github and oidc", names)
	}

	for k, v := range map[string]string{
		"ARBITER_APP_URL":        "app.example.com",
		"ARBITER_REVIEW_URL":     "https://review.example.com/review",
		"ARBITER_BASE_URL":       "ftp://api.example.com",
		"ARBITER_SESSION_SECRET": "short",
		"ARBITER_OIDC_CLIENT_ID": "id",
	} {
		env = map[string]string{k: v}
		if k == "ARBITER_OIDC_CLIENT_ID" {
			env["ARBITER_OIDC_CLIENT_SECRET"] = "secret" // but no issuer
		}
		if _, err := config.FromEnv(getenv); err == nil || !strings.Contains(err.Error(), "ARBITER_") {
			t.Errorf("%s=%s: error %v", k, v, err)
		}
	}
}

// openRedirects are next parameters that once led, or could lead, a browser
// off-site after signing in.
var openRedirects = []string{
	"//evil.example", "/\\evil.example", "/%5Cevil.example", "\\\\evil.example", "/%2F%2Fevil.example",
	"https:evil.example", "https://evil.example/", "/\t/evil.example", "/\n/evil.example", "/./\\evil.example",
	"/..//evil.example", "/.//evil.example",
}

// wantOnSite fails unless a redirect's Location, read as a browser reads it
// (a backslash is a slash; tabs and newlines are dropped), stays on the
// server's origin.
func wantOnSite(t *testing.T, d *dash, r response, what string) {
	t.Helper()
	if r.status != http.StatusSeeOther {
		t.Fatalf("%s: status %d, want 303\n%.500s", what, r.status, r.body)
	}
	loc := strings.NewReplacer("\\", "/", "\t", "", "\n", "", "\r", "").Replace(r.header.Get("Location"))
	base, _ := url.Parse(d.url + "/signin")
	to, err := base.Parse(loc)
	if err != nil || to.Scheme+"://"+to.Host != d.url || to.Path != "/" {
		t.Errorf("%s: Location %q leads to %v, want %s/", what, r.header.Get("Location"), to, d.url)
	}
}

func TestSignIn_NextIsNeverOffSite(t *testing.T) {
	t.Parallel()
	g := newFakeGitHub(t)
	eachDash(t, withGitHub(g), func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("a@example.com")
		// The legitimate ones still work.
		for next, want := range map[string]string{"/keys": "/keys", "/review/": "/review/", d.url + "/audit": d.url + "/audit"} {
			r := b.get("/signin?next=" + url.QueryEscape(next))
			if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
				t.Errorf("GET /signin?next=%s = %d to %q, want %q", next, r.status, r.header.Get("Location"), want)
			}
		}
		for i, next := range openRedirects {
			wantOnSite(t, d, b.get("/signin?next="+url.QueryEscape(next)), "GET /signin?next="+next)
			// The OAuth flow keeps next across the provider, end to end.
			oauth := d.browser()
			r := oauth.get("/auth/github?next=" + url.QueryEscape(next))
			wantStatus(t, r, http.StatusFound)
			r = oauth.get(oauth.get(r.header.Get("Location")).header.Get("Location"))
			wantOnSite(t, d, r, "the GitHub callback with next="+next)
			// And the e-mail link's confirm form.
			email := d.browser()
			if r := email.post("/signin/email", url.Values{"email": {fmt.Sprintf("b%d@example.com", i)}, "next": {next}}); r.status != http.StatusOK {
				t.Fatalf("ask for a link: %d", r.status)
			}
			link, token := d.mail.next(t).link(t)
			if strings.Contains(link, "next=") {
				t.Errorf("the mailed link carries next for %q: %s", next, link)
			}
			wantOnSite(t, d, email.post("/signin/email/confirm", url.Values{"token": {token}, "next": {next}}), "confirm with next="+next)
		}
		// A good next survives the OAuth flow.
		oauth := d.browser()
		r := oauth.get("/auth/github?next=" + url.QueryEscape("/keys"))
		r = oauth.get(oauth.get(r.header.Get("Location")).header.Get("Location"))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/keys" {
			t.Errorf("the GitHub callback with next=/keys = %d to %q", r.status, r.header.Get("Location"))
		}
	})
}

func TestSignIn_DemoAccountIsRefused(t *testing.T) {
	t.Parallel()
	m := startMockOIDC(t)
	withOIDC := func(d *dash) {
		cfg := m.Config()
		d.router.Providers = append(d.router.Providers, web.OIDCProvider(m.Issuer(), cfg.ClientID, cfg.ClientSecret, d.url+"/auth/oidc/callback"))
	}
	eachDash(t, withOIDC, func(t *testing.T, d *dash) {
		// An issuer vouching for the demo account's address.
		b := d.browser()
		m.QueueUser(&mockoidc.MockUser{Subject: "intruder", Email: arbiter.DemoAccountEmail, EmailVerified: true})
		r := b.startOAuth("oidc")
		wantStatus(t, r, http.StatusUnauthorized)
		if !strings.Contains(r.body, "Nobody can sign in to the demo account") || b.signedIn() {
			t.Errorf("an identity for the demo account answered:\n%.2000s", r.body)
		}
		if r.header.Get("Set-Cookie") != "" && strings.Contains(r.header.Get("Set-Cookie"), "arbiter_session=") {
			t.Errorf("a refused sign-in set a session cookie: %s", r.header.Get("Set-Cookie"))
		}

		// An e-mail link for it: refused on the form, nothing sent.
		r = b.post("/signin/email", url.Values{"email": {"Demo@Arbiter.Invalid"}})
		wantStatus(t, r, http.StatusUnauthorized)
		if !strings.Contains(r.body, `data-testid="alert-error"`) || !strings.Contains(r.body, "Nobody can sign in to the demo account") {
			t.Errorf("an e-mail link for the demo account answered:\n%.2000s", r.body)
		}
		select {
		case msg := <-d.mail.messages:
			t.Errorf("a link was mailed to %s", msg.to)
		default:
		}
	})
}

func TestMagicLink_WithoutSMTP(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	var mu sync.Mutex
	logOut := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(p) })
	withLog := func(d *dash) {
		m, err := mail.New("", "", slog.New(slog.NewTextHandler(logOut, nil)), logOut)
		if err != nil {
			t.Fatal(err)
		}
		d.router.Mailer = m
	}
	eachDash(t, withLog, func(t *testing.T, d *dash) {
		b := d.browser()
		r := b.post("/signin/email", url.Values{"email": {"first@example.com"}})
		wantStatus(t, r, http.StatusOK)
		if strings.Contains(r.body, "We sent") || !strings.Contains(r.body, `data-testid="link-in-log"`) || !strings.Contains(r.body, "server&#39;s log") {
			t.Errorf("without SMTP the page says:\n%s", r.body)
		}
		mu.Lock()
		logged := log.String()
		mu.Unlock()
		own := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(d.url) + `/signin/email/confirm\?token=[0-9a-f]{64}$`).FindString(logged)
		if own == "" {
			t.Fatalf("the link is not on a line of its own in the log:\n%s", logged)
		}
		if r := b.get(own); !strings.Contains(r.body, `data-testid="confirm-sign-in"`) {
			t.Errorf("the logged link does not open the confirm page:\n%s", r.body)
		}
	})
	// With SMTP the page says the link was mailed.
	eachDash(t, nil, func(t *testing.T, d *dash) {
		r := d.browser().post("/signin/email", url.Values{"email": {"first@example.com"}})
		if !strings.Contains(r.body, "We sent a sign-in link") || strings.Contains(r.body, "link-in-log") {
			t.Errorf("with SMTP the page says:\n%s", r.body)
		}
		d.mail.next(t)
	})
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestLayout_LinksTheFavicon(t *testing.T) {
	t.Parallel()
	d := newDash(t, dbtest.Dialects[0], nil)
	r := d.browser().get("/signin")
	icon := regexp.MustCompile(`<link rel="icon" href="(/static/favicon\.svg\?v=[0-9a-f]+)" type="image/svg\+xml">`).FindStringSubmatch(r.body)
	if icon == nil {
		t.Fatalf("the layout links no favicon:\n%.800s", r.body)
	}
	res, err := http.Get(d.url + icon[1])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the favicon answers %d, %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
