// Package deploy_test checks the deployment files in deploy/ with the
// tools of their own ecosystems, no engine or cluster needed: the compose
// file with the Compose Specification's loader, the Helm chart rendered by
// helm and decoded strictly into Kubernetes' API types, the systemd units
// with systemd-analyze, the release archives make dist wrote. It is its
// own Go module so that those libraries stay out of the arbiter binary's.
package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/arbiterhq/arbiter/config"
)

// composeSecrets fill deploy/.env.example's empty secrets as an operator
// would.
var composeSecrets = map[string]string{
	"POSTGRES_PASSWORD":      "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718",
	"ARBITER_SECRET_KEY":     "q83vEjRh2qLd8cP2ZnJ0k1XW1uXb2Ag7b5mGb0cH3n8=",
	"ARBITER_SESSION_SECRET": "uE4Qm2sT8vX0zB3dF6hJ9kL1nP4rS7uW0yA3cE6gI9k=",
}

// loadCompose loads deploy/compose.yaml as `docker compose` does with
// the env file given, validating it against the Compose Specification's
// schema.
func loadCompose(t *testing.T, envFile string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithWorkingDirectory("."), cli.WithEnvFiles(envFile), cli.WithDotEnv)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// filledEnvFile writes .env.example with its secrets filled in.
func filledEnvFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(".env.example")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		if k, _, ok := strings.Cut(line, "="); ok && composeSecrets[k] != "" {
			lines[i] = k + "=" + composeSecrets[k]
		}
	}
	p := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompose_RefusesTheExampleUnfilled: .env.example as committed leaves
// the secrets empty, and compose refuses to start, naming what to set.
func TestCompose_RefusesTheExampleUnfilled(t *testing.T) {
	t.Parallel()
	_, err := loadCompose(t, ".env.example")
	if err == nil || !strings.Contains(err.Error(), "in deploy/.env") {
		t.Fatalf("compose with the example's empty secrets = %v, want a refusal naming deploy/.env", err)
	}
}

// TestCompose_Services loads the compose file with its secrets filled
// and checks its wiring: Postgres with a pg_isready health check; a
// one-shot migrate after it is healthy; serve and worker replicas after
// migrate succeeded, with ARBITER_MIGRATE=off; one image for all three;
// every secret from the env file; a volume for the database; and each
// Arbiter service's environment one that Arbiter's own configuration
// accepts.
func TestCompose_Services(t *testing.T) {
	t.Parallel()
	p, err := loadCompose(t, filledEnvFile(t))
	if err != nil {
		t.Fatalf("load deploy/compose.yaml: %v", err)
	}
	postgres, err := p.GetService("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if hc := postgres.HealthCheck; hc == nil || !slices.Contains(hc.Test, "pg_isready") {
		t.Errorf("postgres health check %v, want pg_isready", postgres.HealthCheck)
	}
	if len(postgres.Volumes) != 1 || postgres.Volumes[0].Source != "postgres-data" || postgres.Volumes[0].Target != "/var/lib/postgresql/data" {
		t.Errorf("postgres volumes %+v, want postgres-data on its data directory", postgres.Volumes)
	}
	if _, ok := p.Volumes["postgres-data"]; !ok {
		t.Errorf("volumes %v, want postgres-data", p.Volumes)
	}

	var image string
	for name, want := range map[string]struct {
		command       []string
		afterMigrate  bool
		minReplicas   int
		migrateAtBoot string
	}{
		"migrate": {[]string{"migrate"}, false, 1, "off"},
		"serve":   {[]string{"serve", "--worker=false"}, true, 2, "off"},
		"worker":  {[]string{"worker"}, true, 2, "off"},
	} {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		if image == "" {
			image = s.Image
		}
		if s.Image != image || s.Build == nil || s.Build.Dockerfile != "cmd/arbiter-image/Dockerfile" {
			t.Errorf("%s: image %q build %+v, want %q built from cmd/arbiter-image/Dockerfile", name, s.Image, s.Build, image)
		}
		if !slices.Equal(s.Command, want.command) {
			t.Errorf("%s: command %q, want %q", name, s.Command, want.command)
		}
		if dep, ok := s.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: depends on postgres %+v, want service_healthy", name, s.DependsOn)
		}
		if dep, ok := s.DependsOn["migrate"]; want.afterMigrate && (!ok || dep.Condition != types.ServiceConditionCompletedSuccessfully) {
			t.Errorf("%s: depends on migrate %+v, want service_completed_successfully", name, s.DependsOn)
		}
		if name == "migrate" && s.Restart != "no" {
			t.Errorf("migrate restarts %q, want no: it is one-shot", s.Restart)
		}
		if s.GetScale() < want.minReplicas {
			t.Errorf("%s: %d replicas, want at least %d", name, s.GetScale(), want.minReplicas)
		}
		if !s.ReadOnly || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: read_only %v security_opt %v, want a read-only root and no new privileges", name, s.ReadOnly, s.SecurityOpt)
		}
		env := map[string]string{}
		for k, v := range s.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		for k, v := range composeSecrets {
			if k != "POSTGRES_PASSWORD" && env[k] != v {
				t.Errorf("%s: %s = %q, want the env file's", name, k, env[k])
			}
		}
		if !strings.Contains(env["ARBITER_DATABASE_URL"], ":"+composeSecrets["POSTGRES_PASSWORD"]+"@postgres:5432/") {
			t.Errorf("%s: ARBITER_DATABASE_URL %q does not reach the postgres service with the env file's password", name, env["ARBITER_DATABASE_URL"])
		}
		if env["ARBITER_MIGRATE"] != want.migrateAtBoot {
			t.Errorf("%s: ARBITER_MIGRATE = %q, want %q", name, env["ARBITER_MIGRATE"], want.migrateAtBoot)
		}
		if _, err := config.FromEnv(func(k string) string { return env[k] }, config.ScopeStore, config.ScopeWorker, config.ScopeHTTP); err != nil {
			t.Errorf("%s: Arbiter refuses the environment: %v", name, err)
		}
	}
}
