package handlers

import "testing"

func TestSite_SafeNext(t *testing.T) {
	site := Site{BaseURL: "https://api.example.com", AppURL: "https://app.example.com", ReviewURL: "https://review.example.com"}
	for next, want := range map[string]string{
		"":                                      "/",
		"/keys":                                 "/keys",
		"/keys?revoked=key_1":                   "/keys?revoked=key_1",
		"https://review.example.com/review/":    "https://review.example.com/review/",
		"https://app.example.com/audit":         "https://app.example.com/audit",
		"https://api.example.com/v1":            "/", // not a page a person signs in to
		"https://evil.example/":                 "/",
		"//evil.example/":                       "/",
		"/\\evil.example":                       "/",
		"https://app.example.com@evil.example/": "/",
		"javascript:alert(1)":                   "/",
		"keys":                                  "/",
	} {
		if got := site.SafeNext(next); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestSite_ReviewHome(t *testing.T) {
	if got := (Site{AppURL: "http://localhost:8080", ReviewURL: "http://localhost:8080"}).ReviewHome(); got != "/review" {
		t.Errorf("one host: %q", got)
	}
	if got := (Site{AppURL: "https://app.example.com", ReviewURL: "https://review.example.com"}).ReviewHome(); got != "https://review.example.com/review" {
		t.Errorf("two hosts: %q", got)
	}
}
