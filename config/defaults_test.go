package config_test

import (
	"testing"

	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/worker"
)

// TestDefaults_AreThePackagesOwn keeps the defaults config repeats equal to
// the ones the store, the worker and the verifier apply to a zero value, so
// that help, docs/configuration.md and an unset variable say what the process does.
func TestDefaults_AreThePackagesOwn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"DefaultDatabaseURL", config.DefaultDatabaseURL, db.DefaultURL},
		{"DefaultDatabaseTimeout", config.DefaultDatabaseTimeout, db.DefaultTimeout},
		{"DefaultWorkers", config.DefaultWorkers, worker.DefaultConcurrency},
		{"DefaultAgentTimeout", config.DefaultAgentTimeout, worker.DefaultAttemptTimeout},
		{"DefaultShutdownGrace", config.DefaultShutdownGrace, worker.DefaultGrace},
		{"DefaultAgentBackend", config.DefaultAgentBackend, agent.BackendNone},
	} {
		if tc.got != tc.want {
			t.Errorf("config.%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
