package web

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestConfigFromEnv_DailyTaskCap refuses a default cap the store cannot
// hold, which would fail every create on Postgres, and 0, which the store
// reads as "the default".
func TestConfigFromEnv_DailyTaskCap(t *testing.T) {
	read := func(v string) (Config, error) {
		return ConfigFromEnv(func(k string) string {
			if k == "ARBITER_DAILY_TASK_CAP" {
				return v
			}
			return ""
		}, ScopeStore)
	}
	if c, err := read(""); err != nil || c.DailyTaskCap != arbiter.DefaultDailyTaskCap {
		t.Fatalf("unset: %d, %v; want the default %d", c.DailyTaskCap, err, arbiter.DefaultDailyTaskCap)
	}
	if c, err := read("2147483647"); err != nil || c.DailyTaskCap != arbiter.MaxDailyTaskCap {
		t.Fatalf("the largest cap: %d, %v", c.DailyTaskCap, err)
	}
	for _, v := range []string{"0", "-1", "2147483648", "99999999999", "lots"} {
		if _, err := read(v); err == nil || !strings.Contains(err.Error(), "ARBITER_DAILY_TASK_CAP must be a whole number from 1 to 2147483647") {
			t.Errorf("ARBITER_DAILY_TASK_CAP=%s: %v", v, err)
		}
	}
}

// TestConfigFromEnv_AgentMaxRPS reads the openai backend's fixed limit:
// unset is no limit; a positive number of calls a second, fractions too,
// is the limit; anything else stops the start with the setting's name.
func TestConfigFromEnv_AgentMaxRPS(t *testing.T) {
	read := func(v string) (Config, error) {
		return ConfigFromEnv(func(k string) string {
			if k == "ARBITER_AGENT_MAX_RPS" {
				return v
			}
			return ""
		}, ScopeWorker)
	}
	for v, want := range map[string]float64{"": 0, "5": 5, "0.5": 0.5} {
		if c, err := read(v); err != nil || c.Agent.MaxRPS != want {
			t.Errorf("ARBITER_AGENT_MAX_RPS=%q: %v, %v; want %v", v, c.Agent.MaxRPS, err, want)
		}
	}
	for _, v := range []string{"0", "-1", "NaN", "Inf", "fast"} {
		if _, err := read(v); err == nil || !strings.Contains(err.Error(), "ARBITER_AGENT_MAX_RPS must be a number of calls a second above 0") {
			t.Errorf("ARBITER_AGENT_MAX_RPS=%s: %v", v, err)
		}
	}
}
