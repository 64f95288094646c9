package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/testutil"
)

// loggedLink waits for the sign-in link the server logs (no SMTP set).
func loggedLink(t *testing.T, logs *testutil.SyncBuffer) string {
	t.Helper()
	link := regexp.MustCompile(`url="?(http://[^"\s]+/signin/email/confirm\?token=[0-9a-f]{64})`)
	for deadline := testutil.Patience(t); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := link.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no sign-in link in the log:\n%s", logs.String())
	return ""
}

func TestServe_OriginsFollowTheListenAddress(t *testing.T) {
	t.Parallel()
	// Nothing but the listen address is set (--addr 127.0.0.1:0).
	base, logs := serveWithLogs(t, env(map[string]string{
		"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
	}))
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(base+"/signin/email", url.Values{"email": {"new@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+base) {
		t.Errorf("the CSP's form-action does not name %s: %q", base, csp)
	}
	link := loggedLink(t, logs)
	if !strings.HasPrefix(link, base+"/signin/email/confirm?token=") {
		t.Fatalf("the logged link %s is not on %s", link, base)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(link) + `$`).MatchString(logs.String()) {
		t.Errorf("the link is not on a line of its own in the log:\n%s", logs.String())
	}
	token := strings.TrimPrefix(link, base+"/signin/email/confirm?token=")
	res, err = c.PostForm(base+"/signin/email/confirm", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := "curl -s -X POST " + base + "/v1/tasks"; !strings.Contains(string(page), want) {
		t.Errorf("the overview's example does not read %q:\n%s", want, page)
	}
	if strings.Contains(logs.String(), "level=WARN msg=ARBITER_") || strings.Contains(logs.String(), `level=WARN msg="ARBITER_`) {
		t.Errorf("a warning about origins nobody set:\n%s", logs.String())
	}
}

func TestServe_WarnsOnceAboutAnOriginOnAnotherPort(t *testing.T) {
	t.Parallel()
	_, logs := serveWithLogs(t, env(map[string]string{
		"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
		"ARBITER_APP_URL":      "http://localhost:8080",
	}))
	warning := regexp.MustCompile(`(?m)^.*level=WARN msg="ARBITER_APP_URL=http://localhost:8080: the server listens on port \d+.*$`)
	if n := len(warning.FindAllString(logs.String(), -1)); n != 1 {
		t.Errorf("%d warnings about ARBITER_APP_URL, want one:\n%s", n, logs.String())
	}
}
