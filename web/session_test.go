package web_test

import (
	"bytes"
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	netmail "net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/web"
)

// testClock is a clock tests can move forward.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// smtpSink is a real SMTP server in the test process that keeps every
// message it is given.
type smtpSink struct {
	addr     string
	messages chan sentMail
}

type sentMail struct {
	from, to string
	data     []byte
}

// newSMTPSink starts an SMTP server on loopback that requires PLAIN
// authentication as user/secret.
func newSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	sink := &smtpSink{messages: make(chan sentMail, 100)}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &smtpSession{sink: sink}, nil
	}))
	s.Domain = "localhost"
	s.AllowInsecureAuth = true // loopback only, no TLS in the test
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return sink
}

type smtpSession struct {
	sink     *smtpSink
	authed   bool
	from, to string
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, password string) error {
		if user != "arbiter" || password != "s3cret" {
			return errors.New("bad credentials")
		}
		s.authed = true
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error { s.to = to; return nil }

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.sink.messages <- sentMail{from: s.from, to: s.to, data: b}
	return nil
}

func (s *smtpSession) Reset()        {}
func (s *smtpSession) Logout() error { return nil }

// next returns the next message, failing the test if none comes in 30 s.
func (s *smtpSink) next(t *testing.T) sentMail {
	t.Helper()
	select {
	case m := <-s.messages:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no mail arrived")
		return sentMail{}
	}
}

var linkPattern = regexp.MustCompile(`http://\S+/signin/email/confirm\?token=([0-9a-f]{64})\S*`)

// text returns the decoded body of a message.
func (m sentMail) text(t *testing.T) []byte {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(m.data))
	if err != nil {
		t.Fatalf("unreadable mail: %v\n%s", err, m.data)
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, _ := io.ReadAll(body)
	return text
}

// link returns the sign-in link of a message and its token.
func (m sentMail) link(t *testing.T) (string, string) {
	t.Helper()
	text := m.text(t)
	found := linkPattern.FindSubmatch(text)
	if found == nil {
		t.Fatalf("no sign-in link in the mail:\n%s", text)
	}
	return string(found[0]), string(found[1])
}

// dash is a whole server, dashboard included, over a real store, with mail
// through a real SMTP server.
type dash struct {
	t      *testing.T
	store  *db.DB
	keys   *web.KeyChecker
	srv    *httptest.Server
	url    string
	clock  *testClock
	mail   *smtpSink
	router *web.Router
}

// eachDash runs fn once per store dialect against a fresh server; setup,
// when set, adjusts the router before it serves.
func eachDash(t *testing.T, setup func(d *dash), fn func(t *testing.T, d *dash)) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) { fn(t, newDash(t, dialect, setup)) })
	}
}

func newDash(t *testing.T, dialect string, setup func(d *dash)) *dash {
	t.Helper()
	return newDashOn(t, dialect, db.Options{}, setup)
}

// newDashOn is newDash over a store opened with opts (its clock the
// dash's).
func newDashOn(t *testing.T, dialect string, opts db.Options, setup func(d *dash)) *dash {
	t.Helper()
	clock := &testClock{}
	opts.Now = clock.Now
	store := dbtest.Open(t, dialect, opts)
	sink := newSMTPSink(t)
	mailer, err := mail.NewSMTP("smtp://arbiter:s3cret@"+sink.addr, "arbiter@example.com")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	secret, err := store.SessionSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := &dash{t: t, store: store, keys: web.NewKeyChecker(store, nil), srv: srv, url: srv.URL, clock: clock, mail: sink}
	d.router = &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store, Policies: store,
		},
		KeyChecker: d.keys,
		Logger:     discardLogger(),
		Site:       handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL},
		Sessions:   web.NewSessions(store, secret, false, ""),
		Mailer:     mailer,
		Now:        clock.Now,
	}
	if setup != nil {
		setup(d)
	}
	srv.Config.Handler = d.router.Routes()
	return d
}

// browser is a cookie-keeping client that does not follow redirects, so
// tests see each step.
type browser struct {
	t *testing.T
	d *dash
	c *http.Client
}

func (d *dash) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: d.t, d: d, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// response is what a browser got.
type response struct {
	status int
	header http.Header
	body   string
}

// do sends a request to a path of the server, or to a full URL.
func (b *browser) do(method, target string, form url.Values, header map[string]string) response {
	b.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = b.d.url + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.Header.Set("User-Agent", "dashboard-test/1.0")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, string(out)}
}

func (b *browser) get(target string) response { b.t.Helper(); return b.do("GET", target, nil, nil) }

func (b *browser) post(target string, form url.Values) response {
	b.t.Helper()
	return b.do("POST", target, form, nil)
}

// follow GETs redirects until an answer that is not one.
func (b *browser) follow(r response) response {
	b.t.Helper()
	for i := 0; r.status >= 300 && r.status < 400; i++ {
		if i == 10 {
			b.t.Fatal("too many redirects")
		}
		r = b.get(r.header.Get("Location"))
	}
	return r
}

// signedIn reports whether the browser has a session: / answers the
// overview, or the page a member's role starts on, or the page that says
// the person is a member of no account, each showing who is signed in,
// instead of sending it to sign in.
func (b *browser) signedIn() bool {
	b.t.Helper()
	r := b.get("/")
	if r.status == http.StatusSeeOther && strings.Contains(r.header.Get("Location"), "/signin") {
		return false
	}
	return strings.Contains(b.follow(r).body, `data-testid="signed-in-as"`)
}

// signIn signs the browser in as email through the mailed link.
func (b *browser) signIn(email string) {
	b.t.Helper()
	if r := b.post("/signin/email", url.Values{"email": {email}}); r.status != http.StatusOK {
		b.t.Fatalf("ask for a link: %d\n%s", r.status, r.body)
	}
	m := b.d.mail.next(b.t)
	_, token := m.link(b.t)
	r := b.post("/signin/email/confirm", url.Values{"token": {token}})
	if r.status != http.StatusSeeOther || !b.signedIn() {
		b.t.Fatalf("confirm: %d\n%s", r.status, r.body)
	}
}

func wantStatus(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d\n%.2000s", r.status, status, r.body)
	}
}

func TestMagicLink(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		if b.signedIn() {
			t.Fatal("signed in before signing in")
		}
		r := b.post("/signin/email", url.Values{"email": {"New.Person@Example.com"}})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="email-sent"`) {
			t.Fatalf("no check-your-inbox page:\n%s", r.body)
		}

		m := d.mail.next(t)
		link, token := m.link(t)
		if m.to != "new.person@example.com" || m.from != "arbiter@example.com" {
			t.Errorf("mail from %q to %q", m.from, m.to)
		}
		if !strings.HasPrefix(link, d.url+"/signin/email/confirm?token=") {
			t.Errorf("link %q is not on the app origin %s", link, d.url)
		}

		// Opening the link signs nobody in: it asks for a click.
		r = b.get(link)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="confirm-sign-in"`) || !strings.Contains(r.body, `method="post"`) {
			t.Fatalf("the link did not show a confirm button:\n%s", r.body)
		}
		if r.header.Get("Referrer-Policy") != "strict-origin" {
			t.Errorf("the confirm page's Referrer-Policy = %q; its address holds the token", r.header.Get("Referrer-Policy"))
		}
		// A meta tag overrides the header: the page's must not send its
		// address either, only its origin (no-referrer would also send
		// "Origin: null" with the sign-in form, which the cross-origin
		// check refuses where browsers send no Sec-Fetch-Site).
		if !strings.Contains(r.body, `<meta name="referrer" content="strict-origin">`) || strings.Contains(r.body, `content="same-origin"`) {
			t.Errorf("the confirm page's referrer meta tag lets the token out:\n%.600s", r.body)
		}
		// It names the address it signs in as, so a forwarded link shows
		// it is someone else's.
		if !strings.Contains(r.body, `data-testid="sign-in-as">new.person@example.com</strong>`) || !strings.Contains(r.body, "Sign in as new.person@example.com</button>") {
			t.Errorf("the confirm page does not say which address it signs in as:\n%s", r.body)
		}
		if b.signedIn() {
			t.Fatal("opening the link signed in; only the POST may")
		}
		r = b.post("/signin/email/confirm", url.Values{"token": {token}})
		wantStatus(t, r, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/" {
			t.Errorf("after sign-in, Location = %q, want /", loc)
		}
		if r := b.get("/"); !strings.Contains(r.body, "new.person@example.com") {
			t.Fatalf("the overview does not show who is signed in:\n%s", r.body)
		}
		account, err := d.store.FindAccountByEmail(ctx, "new.person@example.com")
		if err != nil {
			t.Fatalf("no account was created on first sign-in: %v", err)
		}

		// The link works once: a second use, from another browser, fails.
		other := d.browser()
		r = other.get(link)
		wantStatus(t, r, http.StatusUnauthorized)
		if strings.Contains(r.body, token) || !strings.Contains(r.body, "expired or was already used") {
			t.Errorf("a used link's page:\n%s", r.body)
		}
		if !strings.Contains(r.body, "<title>This link cannot be used · Arbiter</title>") || strings.Contains(r.body, "Finish signing in") ||
			!strings.Contains(r.body, `content="strict-origin"`) {
			t.Errorf("a used link's page keeps the confirm page's title, or lets its address out:\n%.800s", r.body)
		}
		r = other.post("/signin/email/confirm", url.Values{"token": {token}})
		wantStatus(t, r, http.StatusUnauthorized)
		if !strings.Contains(r.body, "<title>This link cannot be used · Arbiter</title>") {
			t.Errorf("a used link's sign-in answered:\n%.800s", r.body)
		}
		if other.signedIn() {
			t.Fatal("a used link signed in again")
		}
		if r.header.Get("Set-Cookie") != "" {
			t.Errorf("a refused sign-in set a cookie: %s", r.header.Get("Set-Cookie"))
		}

		// A link is good for 15 minutes.
		other.post("/signin/email", url.Values{"email": {"new.person@example.com"}})
		_, late := d.mail.next(t).link(t)
		d.clock.Advance(arbiter.LoginTokenTTL + time.Second)
		wantStatus(t, other.get("/signin/email/confirm?token="+late), http.StatusUnauthorized)
		wantStatus(t, other.post("/signin/email/confirm", url.Values{"token": {late}}), http.StatusUnauthorized)
		if other.signedIn() {
			t.Fatal("an expired link signed in")
		}

		// The sign-in is in the audit log with how, from where and with what.
		events, err := d.store.ListAuditEvents(ctx, account.ID, 10)
		if err != nil || len(events) != 1 {
			t.Fatalf("audit events = %v, %v; want the one sign-in", events, err)
		}
		if e := events[0]; e.Kind != arbiter.AuditSignIn || e.Detail != arbiter.SignInEmail || e.ClientIP != "127.0.0.1" || e.UserAgent != "dashboard-test/1.0" {
			t.Errorf("sign-in event = %+v", e)
		}
		r = b.get("/audit")
		if !strings.Contains(r.body, `data-testid="audit-sign_in"`) || !strings.Contains(r.body, "E-mail link") || !strings.Contains(r.body, "dashboard-test/1.0") {
			t.Errorf("the audit page does not show the sign-in:\n%s", r.body)
		}
	})
}

func TestMagicLink_NoEnumeration(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		if _, err := d.store.FindOrCreateAccountByEmail(ctx, "known@example.com"); err != nil {
			t.Fatal(err)
		}
		b := d.browser()
		known := b.post("/signin/email", url.Values{"email": {"known@example.com"}})
		unknown := b.post("/signin/email", url.Values{"email": {"unknown@example.com"}})
		if known.status != unknown.status || strings.ReplaceAll(known.body, "known@", "X@") != strings.ReplaceAll(unknown.body, "unknown@", "X@") {
			t.Fatalf("known and unknown addresses get different answers:\n%d %s\n---\n%d %s", known.status, known.body, unknown.status, unknown.body)
		}
		// Both get a link; the unknown one's account is made when it is used.
		got := map[string]bool{d.mail.next(t).to: true, d.mail.next(t).to: true}
		if !got["known@example.com"] || !got["unknown@example.com"] {
			t.Errorf("mails went to %v", got)
		}
		if _, err := d.store.FindAccountByEmail(ctx, "unknown@example.com"); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("asking for a link created an account: %v", err)
		}
	})
}

func TestMagicLink_Refused(t *testing.T) {
	t.Parallel()
	limits := func(d *dash) {
		d.router.SignInLimits = handlers.SignInLimits{
			ByIP:           arbiter.NewRateLimiter(3, time.Hour, nil),
			ByAddressAndIP: arbiter.NewRateLimiter(2, time.Hour, nil),
			ByAddress:      arbiter.NewRateLimiter(100, time.Hour, nil),
		}
	}
	eachDash(t, limits, func(t *testing.T, d *dash) {
		b := d.browser()
		r := b.post("/signin/email", url.Values{"email": {"not an address"}})
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, `data-testid="alert-error"`) || !strings.Contains(r.body, `value="not an address"`) {
			t.Errorf("a malformed address is not explained on the form:\n%s", r.body)
		}

		// Per address from this client: two, then refused.
		wantStatus(t, b.post("/signin/email", url.Values{"email": {"a@example.com"}}), http.StatusOK)
		wantStatus(t, b.post("/signin/email", url.Values{"email": {"a@example.com"}}), http.StatusOK)
		r = b.post("/signin/email", url.Values{"email": {"a@example.com"}})
		wantStatus(t, r, http.StatusTooManyRequests)
		// Per client IP: the refused request cost nothing, so the IP's
		// third link goes to another address, and a fourth is refused.
		wantStatus(t, b.post("/signin/email", url.Values{"email": {"b@example.com"}}), http.StatusOK)
		wantStatus(t, b.post("/signin/email", url.Values{"email": {"c@example.com"}}), http.StatusTooManyRequests)
		for range 3 {
			d.mail.next(t)
		}
		select {
		case m := <-d.mail.messages:
			t.Errorf("a refused request sent mail to %s", m.to)
		default:
		}
	})
}

func TestSignOut_EndsTheSessionEverywhere(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("a@example.com")
		u, _ := url.Parse(d.url)
		var cookie *http.Cookie
		for _, c := range b.c.Jar.Cookies(u) {
			if c.Name == "arbiter_session" {
				cookie = c
			}
		}
		if cookie == nil {
			t.Fatal("no session cookie")
		}

		r := b.post("/signout", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		// The sign-in page says so.
		if r = b.follow(r); !strings.Contains(r.body, `data-testid="signed-out"`) || !strings.Contains(r.body, "You are signed out.") {
			t.Errorf("after signing out:\n%s", r.body)
		}
		if b.signedIn() {
			t.Fatal("still signed in after signing out")
		}
		// The same page, reached otherwise, does not.
		if r := b.get("/signin"); strings.Contains(r.body, "You are signed out") {
			t.Errorf("the sign-in page says so without a sign-out:\n%s", r.body)
		}
		// A copy of the old cookie does not work either: the store ended it.
		copied := d.browser()
		copied.c.Jar.SetCookies(u, []*http.Cookie{cookie})
		if copied.signedIn() {
			t.Fatal("a copy of the cookie still signs in after sign-out")
		}
	})
}

func TestSessionCookie_Attributes(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.post("/signin/email", url.Values{"email": {"a@example.com"}})
		_, token := d.mail.next(t).link(t)
		r := b.post("/signin/email/confirm", url.Values{"token": {token}})
		c := r.header.Get("Set-Cookie")
		for _, want := range []string{"arbiter_session=", "HttpOnly", "SameSite=Lax", "Path=/"} {
			if !strings.Contains(c, want) {
				t.Errorf("session cookie %q lacks %s", c, want)
			}
		}
		if strings.Contains(c, "Secure") {
			t.Errorf("session cookie %q is Secure on an http app URL", c)
		}
		if strings.Contains(c, token) {
			t.Error("the session cookie holds the sign-in token")
		}

		// https app URL: Secure.
		secure := web.NewSessions(d.store, "0123456789abcdef0123456789abcdef", true, ".example.com")
		rec := httptest.NewRecorder()
		person, err := d.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "a@example.com", Email: "a@example.com", EmailVerified: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := secure.SignIn(rec, httptest.NewRequest("POST", "https://app.example.com/", nil), person.ID, arbiter.SignInEmail); err != nil {
			t.Fatal(err)
		}
		if c := rec.Header().Get("Set-Cookie"); !strings.Contains(c, "Secure") || !strings.Contains(c, "Domain=example.com") {
			t.Errorf("https session cookie %q lacks Secure or the cookie domain", c)
		}
	})
}

func TestSignedOutHome_OffersTheDemo(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		r := b.follow(b.get("/"))
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="demo-offer"`) || !strings.Contains(r.body, `href="/review/demo"`) {
			t.Fatalf("the signed-out home does not offer the demo:\n%s", r.body)
		}
		if r := b.follow(b.get("/review/demo")); r.status != http.StatusOK || !strings.Contains(r.body, "demo") {
			t.Errorf("the demo it offers answers %d", r.status)
		}
	})
}
