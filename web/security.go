package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/arbiterhq/arbiter/handlers"
)

// securityHeaders sets the headers every answer carries: a
// Content-Security-Policy that allows no inline script and no framing, no
// MIME sniffing, and referrers only to this origin. formOrigins are the
// origins a form's redirect may lead to besides this one (the dashboard's
// and the reviewer site's, on hosts of their own). With hsts (the app URL is
// https) it also tells browsers to use only https for a year.
func securityHeaders(hsts bool, formOrigins ...string) func(http.Handler) http.Handler {
	formAction := "'self'"
	seen := map[string]bool{}
	for _, o := range formOrigins {
		if o != "" && !seen[o] {
			seen[o] = true
			formAction += " " + o
		}
	}
	csp := strings.Join([]string{
		"default-src 'self'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src 'self'",
		"object-src 'none'",
		"base-uri 'none'",
		"form-action " + formAction,
		"frame-ancestors 'none'",
	}, "; ")
	// The headers' values are made once and shared by every answer, as
	// Header.Set would make them each time; the slices are full, so a
	// handler that adds a value to one makes its own.
	values := func(v string) []string { return []string{v}[:1:1] }
	headers := []struct {
		key    string
		values []string
	}{
		{"Content-Security-Policy", values(csp)},
		{"X-Content-Type-Options", values("nosniff")},
		{"Referrer-Policy", values("same-origin")},
		{"X-Frame-Options", values("DENY")},
	}
	if hsts {
		headers = append(headers, struct {
			key    string
			values []string
		}{"Strict-Transport-Security", values(hstsPolicy)})
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			for _, kv := range headers {
				h[kv.key] = kv.values
			}
			next.ServeHTTP(w, r)
		})
	}
}

// hstsPolicy is the Strict-Transport-Security of an https deployment: a
// year, this host only, since sibling hosts may still serve plain http.
const hstsPolicy = "max-age=31536000"

// crossOriginProtection refuses cookie-authenticated writes sent from
// another origin (CSRF), using the browser's Sec-Fetch-Site or Origin
// headers; trusted are the dashboard's and the reviewer site's origins, which
// share the session cookie.
func crossOriginProtection(trusted ...string) (func(http.Handler) http.Handler, error) {
	p := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := p.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %s: %w", o, err)
		}
	}
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Error(w, r, handlers.StatusError(http.StatusForbidden,
			"This form was sent from another site, so it was refused. Go back to the page and try again."))
	}))
	return p.Handler, nil
}

// withSite is middleware that gives the pages the site's origins.
func withSite(site handlers.Site) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(handlers.NewContextWithSite(r.Context(), site)))
		})
	}
}
