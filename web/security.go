package web

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/arbiterhq/arbiter/handlers"
)

// securityHeaders sets the headers every answer carries: a
// Content-Security-Policy that allows no inline script and no framing, no
// MIME sniffing, and referrers only to this origin. formOrigins are the
// origins a form's redirect may lead to besides this one (the dashboard's
// and the reviewer site's, on hosts of their own).
func securityHeaders(formOrigins ...string) func(http.Handler) http.Handler {
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
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("X-Frame-Options", "DENY")
			next.ServeHTTP(w, r)
		})
	}
}

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
		handlers.PageStatus(w, r, http.StatusForbidden, "Request refused",
			"This form was sent from another site, so it was refused. Go back to the page and try again.")
	}))
	return p.Handler, nil
}

// pageRecoverer turns a panic in a page's handler into the logged 500 page.
func pageRecoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			} else if p == http.ErrAbortHandler {
				panic(p)
			}
			handlers.PageError(w, r, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}()
		next.ServeHTTP(w, r)
	})
}

// withSite is middleware that gives the pages the site's origins.
func withSite(site handlers.Site) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(handlers.WithSite(r.Context(), site)))
		})
	}
}

// wantsHTML reports whether the client asked for a page (a browser) rather
// than JSON (an API client).
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// negotiatedNotFound answers 404 as a page to browsers and as JSON to the
// rest.
func negotiatedNotFound(w http.ResponseWriter, r *http.Request) {
	if wantsHTML(r) {
		handlers.PageNotFound(w, r)
		return
	}
	notFound(w, r)
}

// negotiatedMethodNotAllowed answers 405 as a page to browsers and as JSON
// to the rest.
func negotiatedMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if wantsHTML(r) {
		handlers.PageStatus(w, r, http.StatusMethodNotAllowed, "Not allowed", "This address does not accept "+r.Method+" requests.")
		return
	}
	methodNotAllowed(w, r)
}
