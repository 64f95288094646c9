package handlers

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

var splitSite = Site{BaseURL: "https://api.example.com", AppURL: "https://app.example.com", ReviewURL: "https://review.example.com"}

func TestSite_SafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"":                                      "/",
		"/":                                     "/",
		"/keys":                                 "/keys",
		"/keys?revoked=key_1":                   "/keys?revoked=key_1",
		"/review/":                              "/review/",
		"/review/tasks/tsk_1?x=%2F%2F":          "/review/tasks/tsk_1?x=%2F%2F",
		"https://review.example.com/review/":    "https://review.example.com/review/",
		"https://review.example.com":            "https://review.example.com",
		"https://app.example.com/audit":         "https://app.example.com/audit",
		"https://api.example.com/v1":            "/", // not a page a person signs in to
		"https://evil.example/":                 "/",
		"https://app.example.com@evil.example/": "/",
		"javascript:alert(1)":                   "/",
		"keys":                                  "/",
		// Known bypasses of a prefix check.
		"//evil.example":                              "/",
		"/\\evil.example":                             "/",
		"/%5Cevil.example":                            "/",
		"/%5cevil.example":                            "/",
		"\\\\evil.example":                            "/",
		"/%2F%2Fevil.example":                         "/",
		"/%2f/evil.example":                           "/",
		"https:evil.example":                          "/",
		"https:/evil.example":                         "/",
		"/\t/evil.example":                            "/",
		"/\n/evil.example":                            "/",
		"/\r\n/evil.example":                          "/",
		"/\x00/evil.example":                          "/",
		" //evil.example":                             "/",
		"/./\\evil.example":                           "/",
		"/.//evil.example":                            "/",
		"/..//evil.example":                           "/",
		"/../evil.example":                            "/",
		"/%2e%2e//evil.example":                       "/",
		"/review//evil.example":                       "/",
		"https://review.example.com\\@evil.example":   "/",
		"https://review.example.com/..//evil.example": "/",
	} {
		if got := splitSite.SafeNext(next); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// browserLocation resolves a Location header as a browser does for an http
// page (WHATWG URL): tabs and newlines are dropped, leading and trailing
// spaces and control characters trimmed, and a backslash is a slash.
func browserLocation(t *testing.T, page, location string) *url.URL {
	t.Helper()
	location = strings.Trim(location, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	location = strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(location)
	base, _ := url.Parse(page)
	u, err := base.Parse(location)
	if err != nil {
		return base // the browser stays
	}
	return u
}

// FuzzSite_SafeNext checks that wherever SafeNext sends a browser, through
// http.Redirect, it lands on the dashboard's or the reviewer site's origin.
func FuzzSite_SafeNext(f *testing.F) {
	for _, seed := range []string{"/keys", "//x", "/\\x", "/%5Cx", "\\\\x", "/%2F%2Fx", "https:x", "/\t/x", "/\n/x",
		"/./\\x", "/..//x", "https://review.example.com/review/", "/.%2e//x", "/%09/x", "/a/../..//x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, next string) {
		safe := splitSite.SafeNext(next)
		page := splitSite.AppURL + "/signin/email/confirm"
		rec := httptest.NewRecorder()
		redirect(rec, httptest.NewRequest("POST", page, nil), safe)
		to := browserLocation(t, page, rec.Header().Get("Location"))
		// Browsers lower-case the scheme and the host.
		if origin := strings.ToLower(to.Scheme + "://" + to.Host); origin != splitSite.AppURL && origin != splitSite.ReviewURL {
			t.Fatalf("SafeNext(%q) = %q leads to %s", next, safe, to)
		}
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

func TestSite_ReviewHome(t *testing.T) {
	t.Parallel()
	if got := (Site{AppURL: "http://localhost:8080", ReviewURL: "http://localhost:8080"}).ReviewHome(); got != "/review" {
		t.Errorf("one host: %q", got)
	}
	if got := (Site{AppURL: "https://app.example.com", ReviewURL: "https://review.example.com"}).ReviewHome(); got != "https://review.example.com/review" {
		t.Errorf("two hosts: %q", got)
	}
}
