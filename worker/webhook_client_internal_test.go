package worker

import (
	"errors"
	"net"
	"testing"
)

// TestRefusePrivate_IPv4InsideIPv6 asks the dial guard about addresses in
// every IPv6 form that carries an IPv4 address, as the dialer would just
// before connecting (nothing is sent): those that carry a private,
// loopback or metadata address are refused, those that carry a public one
// pass.
func TestRefusePrivate_IPv4InsideIPv6(t *testing.T) {
	t.Parallel()
	for addr, refused := range map[string]bool{
		"::127.0.0.1":                          true,  // IPv4-compatible
		"::ffff:127.0.0.1":                     true,  // IPv4-mapped
		"::ffff:0:10.0.0.1":                    true,  // IPv4-translated
		"64:ff9b::169.254.169.254":             true,  // NAT64
		"2002:c0a8:101::1":                     true,  // 6to4 of 192.168.1.1
		"2001:0:4136:e378:8000:63bf:80ff:fffe": true,  // Teredo, client 127.0.0.1
		"2001:0:a00:1:8000:63bf:f7f7:f7f7":     true,  // Teredo, server 10.0.0.1
		"2606:4700:1:2:0:5efe:10.0.0.1":        true,  // ISATAP
		"::8.8.8.8":                            false, // the same forms with public addresses
		"::ffff:8.8.8.8":                       false,
		"64:ff9b::8.8.8.8":                     false,
		"2002:808:808::1":                      false,
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7": false,
		"2606:4700:1:2:0:5efe:8.8.8.8":         false,
		"2606:4700:4700::1111":                 false,
	} {
		err := refusePrivate("tcp6", net.JoinHostPort(addr, "443"), nil)
		if got := errors.Is(err, ErrPrivateAddress); got != refused {
			t.Errorf("the guard on %s: %v, want refused %v", addr, err, refused)
		}
	}
}
