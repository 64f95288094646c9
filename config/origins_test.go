package config

import (
	"strings"
	"testing"
)

func TestListenOrigin(t *testing.T) {
	for addr, want := range map[string]string{
		":9090":          "http://localhost:9090",
		"0.0.0.0:9090":   "http://localhost:9090",
		"[::]:9090":      "http://localhost:9090",
		"127.0.0.1:9090": "http://127.0.0.1:9090",
		"[::1]:9090":     "http://[::1]:9090",
		"Box.LAN:80":     "http://box.lan:80",
		"nonsense":       DefaultOrigin,
	} {
		if got := ListenOrigin(addr); got != want {
			t.Errorf("ListenOrigin(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestConfig_DeriveOrigins(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		cfg                       Config
		listening                 string
		base, app, review         string
		warnAbout, noWarningAbout []string
	}{{
		name: "only ARBITER_ADDR changed", cfg: Config{Addr: ":9090"}, listening: "[::]:9090",
		base: "http://localhost:9090", app: "http://localhost:9090", review: "http://localhost:9090",
	}, {
		name: "a loopback address and port 0", cfg: Config{Addr: "127.0.0.1:0"}, listening: "127.0.0.1:41234",
		base: "http://127.0.0.1:41234", app: "http://127.0.0.1:41234", review: "http://127.0.0.1:41234",
	}, {
		name: "the default", cfg: Config{Addr: DefaultAddr}, listening: "[::]:8080",
		base: DefaultOrigin, app: DefaultOrigin, review: DefaultOrigin,
	}, {
		name:      "a set origin on another local port",
		cfg:       Config{Addr: ":9090", AppURL: "http://localhost:8080"},
		listening: "[::]:9090",
		base:      "http://localhost:9090", app: "http://localhost:8080", review: "http://localhost:9090",
		warnAbout: []string{"ARBITER_APP_URL=http://localhost:8080", "port 9090"}, noWarningAbout: []string{"ARBITER_BASE_URL", "COOKIE"},
	}, {
		name:      "set origins with an explicit port elsewhere",
		cfg:       Config{Addr: ":9090", BaseURL: "http://api.example.com:8080", AppURL: "http://api.example.com:8080", ReviewURL: "http://api.example.com:8080"},
		listening: "[::]:9090",
		base:      "http://api.example.com:8080", app: "http://api.example.com:8080", review: "http://api.example.com:8080",
		warnAbout: []string{"ARBITER_BASE_URL=", "ARBITER_APP_URL=", "ARBITER_REVIEW_URL="},
	}, {
		name:      "set origins that match",
		cfg:       Config{Addr: "127.0.0.1:9090", AppURL: "http://127.0.0.1:9090", ReviewURL: "http://127.0.0.1:9090"},
		listening: "127.0.0.1:9090",
		base:      "http://127.0.0.1:9090", app: "http://127.0.0.1:9090", review: "http://127.0.0.1:9090",
		noWarningAbout: []string{"ARBITER_"},
	}, {
		name: "behind a proxy",
		cfg: Config{Addr: ":8080", BaseURL: "https://api.example.com", AppURL: "https://app.example.com",
			ReviewURL: "https://review.example.com", CookieDomain: "example.com"},
		listening: "[::]:8080",
		base:      "https://api.example.com", app: "https://app.example.com", review: "https://review.example.com",
		noWarningAbout: []string{"ARBITER_"},
	}, {
		name:      "split hosts the cookie does not cover",
		cfg:       Config{Addr: ":8080", AppURL: "https://app.example.com", ReviewURL: "https://review.example.org", CookieDomain: "example.com"},
		listening: "[::]:8080",
		base:      "http://localhost:8080", app: "https://app.example.com", review: "https://review.example.org",
		warnAbout: []string{"ARBITER_COOKIE_DOMAIN does not cover both"}, noWarningAbout: []string{"listens on port"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			warnings := c.DeriveOrigins(tc.listening)
			if c.BaseURL != tc.base || c.AppURL != tc.app || c.ReviewURL != tc.review {
				t.Errorf("origins = %s %s %s, want %s %s %s", c.BaseURL, c.AppURL, c.ReviewURL, tc.base, tc.app, tc.review)
			}
			all := strings.Join(warnings, "\n")
			for _, want := range tc.warnAbout {
				if !strings.Contains(all, want) {
					t.Errorf("warnings %q do not mention %q", warnings, want)
				}
			}
			for _, not := range tc.noWarningAbout {
				if strings.Contains(all, not) {
					t.Errorf("warnings %q mention %q", warnings, not)
				}
			}
			if len(warnings) > 1 {
				t.Errorf("%d warnings, want at most one: %q", len(warnings), warnings)
			}
		})
	}
}

func TestFromEnv_LeavesUnsetOriginsToTheListenAddress(t *testing.T) {
	c, err := FromEnv(func(k string) string { return map[string]string{"ARBITER_ADDR": ":9090"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL != "" || c.AppURL != "" || c.ReviewURL != "" {
		t.Fatalf("unset origins read as %q %q %q", c.BaseURL, c.AppURL, c.ReviewURL)
	}
	c.DeriveOrigins("[::]:9090")
	if c.AppURL != "http://localhost:9090" {
		t.Errorf("app origin = %q", c.AppURL)
	}
}
