package web

import (
	"net/netip"
	"testing"

	"github.com/arbiterhq/arbiter/config"
)

func TestClientIPOf(t *testing.T) {
	t.Parallel()
	trusted, err := config.ParseTrustedProxies("10.0.0.0/8, 192.168.1.5, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer string
		forwarded  []string
		trusted    []netip.Prefix
		want       string
	}{
		{"NoProxiesTrusted", "203.0.113.9:4000", []string{"198.51.100.1"}, nil, "203.0.113.9"},
		{"UntrustedPeerIsTheClientWhateverItForwards", "203.0.113.9:4000", []string{"198.51.100.1"}, trusted, "203.0.113.9"},
		{"TrustedPeerWithoutHeader", "10.1.2.3:4000", nil, trusted, "10.1.2.3"},
		{"TrustedPeerNamesTheClient", "10.1.2.3:4000", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"ClientSpoofsTheLeftOfTheHeader", "10.1.2.3:4000", []string{"1.1.1.1, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"ChainOfTrustedProxies", "192.168.1.5:4000", []string{"1.1.1.1, 198.51.100.1, 10.9.9.9"}, trusted, "198.51.100.1"},
		{"SeveralHeaderLines", "10.1.2.3:4000", []string{"1.1.1.1", "198.51.100.1, 10.9.9.9"}, trusted, "198.51.100.1"},
		{"EveryHopTrusted", "10.1.2.3:4000", []string{"10.7.7.7, 10.8.8.8"}, trusted, "10.7.7.7"},
		{"GarbageStopsAtTheLastTrustedHop", "10.1.2.3:4000", []string{"198.51.100.1, <script>, 10.8.8.8"}, trusted, "10.8.8.8"},
		{"GarbageLeftOfTheClientIsIgnored", "10.1.2.3:4000", []string{"junk, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"ForwardedWithPort", "10.1.2.3:4000", []string{"198.51.100.1:5555"}, trusted, "198.51.100.1"},
		{"IPv6Client", "[fd00::1]:4000", []string{"2001:db8::7"}, trusted, "2001:db8::7"},
		{"IPv4MappedPeer", "[::ffff:10.1.2.3]:4000", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"UnreadablePeer", "pipe", []string{"198.51.100.1"}, trusted, "pipe"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientIPOf(tc.peer, tc.forwarded, tc.trusted); got != tc.want {
				t.Errorf("clientIPOf(%q, %q) = %q, want %q", tc.peer, tc.forwarded, got, tc.want)
			}
		})
	}
}
