package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/config"
)

func TestFromEnv_IdempotencyTTL(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 24 * time.Hour, "1h": time.Hour, "1s": time.Second, "168h": 7 * 24 * time.Hour} {
		c, err := config.FromEnv(func(k string) string {
			if k == "ARBITER_IDEMPOTENCY_TTL" {
				return value
			}
			return ""
		})
		if err != nil || c.IdempotencyTTL != want {
			t.Errorf("ARBITER_IDEMPOTENCY_TTL=%q: %v, %v; want %v", value, c.IdempotencyTTL, err, want)
		}
	}
	for _, value := range []string{"0", "0s", "500ms", "-1h", "a day", "24"} {
		_, err := config.FromEnv(func(k string) string {
			if k == "ARBITER_IDEMPOTENCY_TTL" {
				return value
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), "ARBITER_IDEMPOTENCY_TTL") {
			t.Errorf("ARBITER_IDEMPOTENCY_TTL=%q: error %v, want one naming the variable", value, err)
		}
	}
}
