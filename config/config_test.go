package config

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestFromEnv_DailyTaskCap refuses a default cap the store cannot
// hold, which would fail every create on Postgres, and 0, which the store
// reads as "the default".
func TestFromEnv_DailyTaskCap(t *testing.T) {
	read := func(v string) (Config, error) {
		return FromEnv(func(k string) string {
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

// TestFromEnv_DatabaseReadURL reads the read replica's URL: unset is none
// (the heavy reads go to the primary); a postgres:// URL is kept; anything
// else stops the start with the setting's name.
func TestFromEnv_DatabaseReadURL(t *testing.T) {
	read := func(v string) (Config, error) {
		return FromEnv(func(k string) string {
			if k == "ARBITER_DATABASE_READ_URL" {
				return v
			}
			return ""
		}, ScopeStore)
	}
	if c, err := read(""); err != nil || c.DatabaseReadURL != "" {
		t.Fatalf("unset: %q, %v; want none", c.DatabaseReadURL, err)
	}
	for _, v := range []string{"postgres://arbiter@standby:5432/arbiter", "postgresql://arbiter@a,b/arbiter?target_session_attrs=standby"} {
		if c, err := read(v); err != nil || c.DatabaseReadURL != v {
			t.Errorf("%s: %q, %v", v, c.DatabaseReadURL, err)
		}
	}
	for _, v := range []string{"sqlite:replica.db", "standby:5432", "mysql://x"} {
		if _, err := read(v); err == nil || !strings.Contains(err.Error(), "ARBITER_DATABASE_READ_URL must be a postgres:// URL of a read replica") {
			t.Errorf("ARBITER_DATABASE_READ_URL=%s: %v", v, err)
		}
	}
}

// TestFromEnv_AgentVersion reads the verifier version label: unset is
// none; a label of at most MaxLabelChars characters is kept as it is;
// anything longer, or not text, stops the start with the setting's name.
func TestFromEnv_AgentVersion(t *testing.T) {
	read := func(v string) (Config, error) {
		return FromEnv(func(k string) string {
			if k == "ARBITER_AGENT_VERSION" {
				return v
			}
			return ""
		}, ScopeWorker)
	}
	for _, v := range []string{"", "2026-11-prompt-3", strings.Repeat("é", arbiter.MaxLabelChars)} {
		if c, err := read(v); err != nil || c.AgentVersion != v {
			t.Errorf("ARBITER_AGENT_VERSION=%q: %q, %v", v, c.AgentVersion, err)
		}
	}
	for _, v := range []string{strings.Repeat("v", arbiter.MaxLabelChars+1), "a\x00b", "\xff"} {
		if _, err := read(v); err == nil || !strings.Contains(err.Error(), "ARBITER_AGENT_VERSION must be valid text") {
			t.Errorf("ARBITER_AGENT_VERSION=%q: %v", v, err)
		}
	}
}

// TestFromEnv_AgentMaxRPS reads the openai backend's fixed limit:
// unset is no limit; a positive number of calls a second, fractions too,
// is the limit; anything else stops the start with the setting's name.
func TestFromEnv_AgentMaxRPS(t *testing.T) {
	read := func(v string) (Config, error) {
		return FromEnv(func(k string) string {
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

func TestFromEnv(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://x", "ARBITER_WORKERS": "3"}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || c.DatabaseURL != "postgres://x" || c.Workers != 3 || c.Addr != ":8080" || c.DailyTaskCap != 1000 {
		t.Fatalf("config = %+v, %v", c, err)
	}
	env["ARBITER_DATABASE_URL"] = "sqlite:a.db"
	if c, _ = FromEnv(func(k string) string { return env[k] }); c.DatabaseURL != "sqlite:a.db" {
		t.Errorf("ARBITER_DATABASE_URL does not win over DATABASE_URL: %q", c.DatabaseURL)
	}
	for k, v := range map[string]string{"ARBITER_WORKERS": "0", "ARBITER_DAILY_TASK_CAP": "many", "ARBITER_SHUTDOWN_GRACE": "10"} {
		_, err := FromEnv(func(name string) string {
			if name == k {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v does not name the variable", k, v, err)
		}
	}
}
