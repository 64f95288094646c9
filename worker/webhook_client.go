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
func NewWebhookClient(allowPrivate bool) *http.Client { return newWebhookClient(allowPrivate, nil) }

// newWebhookClient is NewWebhookClient looking names up with resolver (nil:
// the system's), which tests replace so that no lookup leaves the machine.
func newWebhookClient(allowPrivate bool, resolver *net.Resolver) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver}
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

// noPublicAddress is what the attempt log says when a delivery found no
// address it may connect to: the same sentence whether the host's name
// did not resolve, resolved to an address that is not public, or is one,
// so that the log tells an account nothing of the names inside the
// network the deliverer runs in.
const noPublicAddress = "The host has no public address that webhooks may reach: its name does not resolve, or it is or resolves to a private, loopback or reserved address."

// addressRefused reports whether err says that the delivery found no
// address it may connect to: the guard's refusal, or a name that did not
// resolve.
func addressRefused(err error) bool {
	var dnsErr *net.DNSError
	return errors.Is(err, ErrPrivateAddress) || errors.As(err, &dnsErr)
}
