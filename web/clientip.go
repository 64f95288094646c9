package web

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/arbiterhq/arbiter/handlers"
)

// clientIP is middleware that decides who sent each request, for the audit
// log and every per-client limit: the connection's peer, or, when the peer
// is one of the trusted proxies, the right-most address of
// X-Forwarded-For that is not a trusted proxy. Addresses left of it were
// written by the client and are not believed.
func clientIP(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ip := clientIPOf(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), trusted)
			next.ServeHTTP(w, r.WithContext(handlers.NewContextWithClientIP(r.Context(), ip)))
		})
	}
}

// clientIPOf returns the client's address of a request from the peer
// remoteAddr ("host:port") carrying the X-Forwarded-For header values
// forwarded: the peer itself unless it is trusted; else, walking
// X-Forwarded-For from the right, the first address that is not trusted.
// When every forwarded address is trusted, the left-most one is the client;
// when an entry cannot be read, the last trusted hop before it is.
func clientIPOf(remoteAddr string, forwarded []string, trusted []netip.Prefix) string {
	peer := parseIP(remoteAddr)
	if !peer.IsValid() {
		if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
			return host
		}
		return remoteAddr
	}
	if !isTrusted(peer, trusted) {
		return peer.String()
	}
	var hops []string
	for _, v := range forwarded {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		ip := parseIP(strings.TrimSpace(hops[i]))
		if !ip.IsValid() {
			break
		}
		client = ip
		if !isTrusted(ip, trusted) {
			break
		}
	}
	return client.String()
}

// parseIP reads an address with or without a port ("1.2.3.4",
// "1.2.3.4:80", "[::1]:80", "::1"); the zero Addr when it is neither.
func parseIP(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap().WithZone("")
}

func isTrusted(ip netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
