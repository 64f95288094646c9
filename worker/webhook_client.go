package worker

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/arbiterhq/arbiter"
)

// ErrPrivateAddress refuses a connection to an address that is not public
// (see arbiter.PublicAddress).
var ErrPrivateAddress = errors.New("the host resolves to a private, loopback or reserved address, which webhooks may not reach")

// NewWebhookClient returns the HTTP client deliveries are sent with: no
// proxy, no redirects followed (a 3xx is an answer, and a failure), at most
// arbiter.WebhookTimeout per attempt, and, unless allowPrivate, a dialer
// that refuses every address arbiter.PublicAddress refuses. The check runs
// on the address the connection is about to use, after DNS resolution, so
// a name that resolves to 127.0.0.1 is refused as 127.0.0.1 is.
func NewWebhookClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: arbiter.WebhookTimeout,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   arbiter.WebhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// refusePrivate is a net.Dialer Control hook: it refuses to connect to an
// address that is not public.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return ErrPrivateAddress
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !arbiter.PublicAddress(ip) {
		return ErrPrivateAddress
	}
	return nil
}

// dialRefused reports whether err is the guard's refusal.
func dialRefused(err error) bool { return errors.Is(err, ErrPrivateAddress) }
