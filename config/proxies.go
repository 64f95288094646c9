package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads a comma-separated list of networks such as
// "10.0.0.0/8, 192.168.1.5" (ARBITER_TRUSTED_PROXIES): CIDRs, or single
// addresses meaning themselves.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			ip, ipErr := netip.ParseAddr(f)
			if ipErr != nil || ip.Zone() != "" {
				return nil, fmt.Errorf("%q is not one", f)
			}
			p = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		nets = append(nets, p.Masked())
	}
	return nets, nil
}
