package config

import (
	"regexp"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestSettings_AreWellFormed checks every entry of Settings, including ones
// added later: one variable and one flag each, a help text, a scope, and a
// default its own parser accepts.
func TestSettings_AreWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^ARBITER_[A-Z0-9_]+$`)
	envs, flags := map[string]bool{}, map[string]bool{}
	for _, s := range Settings {
		if !name.MatchString(s.Env) {
			t.Errorf("%q is not an ARBITER_ variable", s.Env)
		}
		if envs[s.Env] || (s.Fallback != "" && envs[s.Fallback]) {
			t.Errorf("%s is declared twice", s.Env)
		}
		envs[s.Env], envs[s.Fallback] = true, s.Fallback != ""
		if s.Flag != "" {
			if flags[s.Flag] {
				t.Errorf("--%s overrides two settings", s.Flag)
			}
			flags[s.Flag] = true
		}
		if s.Help == "" || s.Set == nil {
			t.Errorf("%s has no help or no parser", s.Env)
		}
		if s.Scope < ScopeStore || s.Scope > ScopeHTTP {
			t.Errorf("%s has no known scope", s.Env)
		}
		if s.Default != "" {
			if err := s.Set(&Config{}, s.Default); err != nil {
				t.Errorf("%s's default %q does not parse: %v", s.Env, s.Default, err)
			}
		}
	}
}

func TestFromEnv_ReadsOnlyTheScopesAsked(t *testing.T) {
	read := map[string]bool{}
	bad := map[string]string{"ARBITER_WORKERS": "many", "ARBITER_SESSION_SECRET": "short"}
	c, err := FromEnv(func(k string) string { read[k] = true; return bad[k] }, ScopeStore)
	if err != nil {
		t.Fatalf("the store's settings failed on other scopes' values: %v", err)
	}
	if c.DailyTaskCap != arbiter.DefaultDailyTaskCap || c.DatabaseURL == "" {
		t.Errorf("store config = %+v", c)
	}
	for _, s := range Settings {
		if read[s.Env] != (s.Scope == ScopeStore) {
			t.Errorf("%s read = %v", s.Env, read[s.Env])
		}
	}
	if _, err := FromEnv(func(k string) string { return bad[k] }, ScopeStore, ScopeWorker); err == nil {
		t.Error("ARBITER_WORKERS=many passed with the worker's scope")
	}
}

func TestFromEnv_HidesSecretValues(t *testing.T) {
	_, err := FromEnv(func(k string) string {
		if k == "ARBITER_SESSION_SECRET" {
			return "hunter2-too-short"
		}
		return ""
	})
	if err == nil || regexp.MustCompile(`hunter2`).MatchString(err.Error()) {
		t.Errorf("error = %v, want one that does not repeat the secret", err)
	}
}
