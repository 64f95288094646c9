package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ListenOrigin returns the origin a browser on this machine reaches a server
// listening on addr at: http://localhost:PORT when addr names no host or
// every address (":9090", "0.0.0.0:9090", "[::]:9090"), else
// http://HOST:PORT ("127.0.0.1:9090" gives http://127.0.0.1:9090).
func ListenOrigin(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return DefaultOrigin
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + strings.ToLower(net.JoinHostPort(host, port))
}

// DeriveOrigins fills the origins left unset (ARBITER_BASE_URL,
// ARBITER_APP_URL, ARBITER_REVIEW_URL) from the address the server listens
// on, so changing ARBITER_ADDR alone moves the sign-in links, the
// dashboard's examples and the Content-Security-Policy with it. listening
// is the listener's address, whose port is the real one when c.Addr asked
// for port 0; the host comes from c.Addr.
//
// It returns the warnings to log once at start: one about the origins that
// were set but name another port than the one listened on, when they name
// their port or a local host (the links they make lead nowhere; an origin
// such as https://app.example.com is left alone, as a reverse proxy
// forwards it), and one when the dashboard and the reviewer site are on
// different hosts that the session cookie's domain does not both cover.
func (c *Config) DeriveOrigins(listening string) (warnings []string) {
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		host = ""
	}
	_, port, err := net.SplitHostPort(listening)
	if err != nil {
		return nil
	}
	derived := ListenOrigin(net.JoinHostPort(host, port))
	var mismatched []string
	for _, o := range []struct {
		name   string
		origin *string
	}{{"ARBITER_BASE_URL", &c.BaseURL}, {"ARBITER_APP_URL", &c.AppURL}, {"ARBITER_REVIEW_URL", &c.ReviewURL}} {
		if *o.origin == "" {
			*o.origin = derived
			continue
		}
		if u, err := url.Parse(*o.origin); err == nil && elsewhere(u, host, port) {
			mismatched = append(mismatched, o.name+"="+*o.origin)
		}
	}
	if len(mismatched) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: the server listens on port %s, so sign-in links and redirects there lead nowhere "+
			"unless a proxy forwards them; unset them to follow ARBITER_ADDR, or set them to the address people open",
			strings.Join(mismatched, ", "), port))
	}
	app, review := hostname(c.AppURL), hostname(c.ReviewURL)
	if app != review && !(cookieCovers(c.CookieDomain, app) && cookieCovers(c.CookieDomain, review)) {
		warnings = append(warnings, fmt.Sprintf("ARBITER_APP_URL and ARBITER_REVIEW_URL are on different hosts (%s, %s), "+
			"and ARBITER_COOKIE_DOMAIN does not cover both: a sign-in on the dashboard does not reach the reviewer site. "+
			"Set ARBITER_COOKIE_DOMAIN to their common domain", app, review))
	}
	return warnings
}

// hostname returns the lower-cased host name of an origin, without its
// port.
func hostname(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return origin
	}
	return strings.ToLower(u.Hostname())
}

// cookieCovers reports whether a cookie with the Domain attribute domain is
// sent to host.
func cookieCovers(domain, host string) bool {
	domain = strings.ToLower(strings.TrimPrefix(domain, "."))
	return domain != "" && (host == domain || strings.HasSuffix(host, "."+domain))
}

// elsewhere reports whether origin u, set by hand, names a port other than
// the listen port while it names its port or a host of this machine.
func elsewhere(u *url.URL, listenHost, listenPort string) bool {
	port, explicit := u.Port(), u.Port() != ""
	if !explicit {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port == listenPort {
		return false
	}
	return explicit || localHost(u.Hostname()) || strings.EqualFold(u.Hostname(), listenHost)
}

// localHost reports whether host names this machine: localhost or a
// loopback or unspecified address.
func localHost(host string) bool {
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}
