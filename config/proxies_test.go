package config

import (
	"strings"
	"testing"
)

func TestFromEnv_TrustedProxies(t *testing.T) {
	c, err := FromEnv(func(k string) string {
		if k == "ARBITER_TRUSTED_PROXIES" {
			return " 10.0.0.0/8 ,127.0.0.1, ::1/128,"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.TrustedProxies {
		got = append(got, p.String())
	}
	if strings.Join(got, " ") != "10.0.0.0/8 127.0.0.1/32 ::1/128" {
		t.Errorf("TrustedProxies = %v", got)
	}
	if c, _ := FromEnv(func(string) string { return "" }); len(c.TrustedProxies) != 0 {
		t.Errorf("TrustedProxies without the variable = %v, want none", c.TrustedProxies)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.internal", "10.0.0.0/8;192.168.0.0/16", "fe80::1%eth0"} {
		_, err := FromEnv(func(k string) string {
			if k == "ARBITER_TRUSTED_PROXIES" {
				return bad
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), "ARBITER_TRUSTED_PROXIES") {
			t.Errorf("ARBITER_TRUSTED_PROXIES=%q: error %v does not name the variable", bad, err)
		}
	}
}
