package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// brokenEnv has a value no command accepts for every kind of setting, so a
// help that read the configuration would fail.
var brokenEnv = env(map[string]string{
	"ARBITER_WORKERS":        "many",
	"ARBITER_DATABASE_URL":   "postgres://127.0.0.1:1/nowhere",
	"ARBITER_SESSION_SECRET": "short",
	"ARBITER_LOG_LEVEL":      "loud",
})

// runHelp runs args, which ask for help, and returns its stdout; it fails
// unless run returned nil and wrote nothing to stderr.
func runHelp(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, brokenEnv, nil, &stdout, &stderr); err != nil {
		t.Fatalf("arbiter %s = %v, want nil\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("arbiter %s wrote to stderr: %q", strings.Join(args, " "), stderr.String())
	}
	return stdout.String()
}

func TestRun_Help(t *testing.T) {
	t.Parallel()
	everyCommand := []string{"serve", "worker", "migrate", "admin create-key", "admin list-keys",
		"admin revoke-key", "admin set-cap", "task create", "task get", "task list", "task calibration", "version", "--version"}
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"--help"}, append([]string{"Usage: arbiter COMMAND"}, everyCommand...), []string{"ARBITER_", "--email"}},
		{[]string{"-h"}, everyCommand, nil},
		{[]string{"help"}, everyCommand, nil},
		{[]string{"serve", "--help"},
			[]string{"Usage: arbiter serve", "--addr ADDR", "listen address (env ARBITER_ADDR, default :8080)",
				"--pprof-addr", "ARBITER_PPROF_ADDR", "--metrics-addr", "ARBITER_METRICS_ADDR", "--worker", "ARBITER_DATABASE_URL", "DATABASE_URL",
				"ARBITER_WORKERS", "default 8", "ARBITER_AGENT_RULES", "ARBITER_SESSION_SECRET", "ARBITER_OIDC_ISSUER"},
			[]string{"--email", "--prompt", "--id", "SVC_API_KEY"}},
		{[]string{"serve", "-h"}, []string{"Usage: arbiter serve", "--addr"}, nil},
		{[]string{"help", "serve"}, []string{"Usage: arbiter serve", "--addr"}, nil},
		{[]string{"worker", "--help"},
			[]string{"Usage: arbiter worker", "ARBITER_DATABASE_URL", "ARBITER_WORKERS", "ARBITER_AGENT", "ARBITER_AGENT_MAX_RPS", "ARBITER_LOG_LEVEL", "ARBITER_METRICS_ADDR"},
			[]string{"--addr", "ARBITER_ADDR", "--worker", "ARBITER_SESSION_SECRET", "--email", "SVC_API_KEY"}},
		{[]string{"migrate", "--help"},
			[]string{"Usage: arbiter migrate", "ARBITER_DATABASE_URL"},
			[]string{"--addr", "ARBITER_WORKERS", "ARBITER_ADDR", "--email"}},
		{[]string{"admin", "--help"},
			[]string{"Usage: arbiter admin COMMAND", "create-key", "list-keys", "revoke-key", "set-cap"},
			[]string{"task create", "serve"}},
		{[]string{"admin", "-h"}, []string{"Usage: arbiter admin COMMAND"}, nil},
		{[]string{"admin", "help", "set-cap"}, []string{"Usage: arbiter admin set-cap", "--cap"}, nil},
		{[]string{"admin", "create-key", "--help"},
			[]string{"Usage: arbiter admin create-key --email E [--name N]", "--email EMAIL", "--name NAME", `(default "default")`, "ARBITER_DATABASE_URL"},
			[]string{"--id", "--cap", "--addr", "ARBITER_WORKERS", "ARBITER_ADDR"}},
		{[]string{"admin", "list-keys", "--help"},
			[]string{"Usage: arbiter admin list-keys", "--email", "ARBITER_DATABASE_URL"},
			[]string{"--name", "--id", "--cap", "--addr"}},
		{[]string{"admin", "revoke-key", "-h"},
			[]string{"Usage: arbiter admin revoke-key", "--id", "ARBITER_DATABASE_URL"},
			[]string{"--email", "--name", "--cap", "--addr"}},
		{[]string{"admin", "set-cap", "--help"},
			[]string{"Usage: arbiter admin set-cap", "--email", "--cap", "ARBITER_DATABASE_URL"},
			[]string{"--name", "--id", "--addr"}},
		{[]string{"task", "--help"},
			[]string{"Usage: arbiter task COMMAND", "create", "get"},
			[]string{"create-key", "\n  serve"}},
		{[]string{"task", "create", "--help"},
			[]string{"Usage: arbiter task create", "--prompt", "--verdict", "--context", "--threshold", "--task-type",
				"--touchpoint", "--source", "--callback-url", "--idempotency-key", "--wait", "--timeout", "SVC_API_KEY", "SVC_BASE_URL", "default http://localhost:8080"},
			[]string{"--email", "--addr", "ARBITER_"}},
		{[]string{"task", "get", "--help"},
			[]string{"Usage: arbiter task get ID", "SVC_API_KEY", "SVC_BASE_URL"},
			[]string{"--prompt", "--email", "ARBITER_"}},
		{[]string{"task", "list", "--help"},
			[]string{"Usage: arbiter task list", "--status", "--task-type", "--source", "--touchpoint", "--final-tier",
				"--created-after", "--created-before", "--limit", "--starting-after", "--all", "SVC_API_KEY"},
			[]string{"--prompt", "--email", "ARBITER_"}},
		{[]string{"version", "--help"}, []string{"Usage: arbiter version"}, []string{"--addr", "ARBITER_"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := runHelp(t, tc.args...)
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("the help does not hold %q:\n%s", want, out)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(out, not) {
					t.Errorf("the help holds %q, which is not this command's:\n%s", not, out)
				}
			}
		})
	}
}

// TestRun_HelpListsTheSettingsOfEveryCommand walks the command table, so a
// command or a setting added later is covered too.
func TestRun_HelpListsTheSettingsOfEveryCommand(t *testing.T) {
	t.Parallel()
	top := runHelp(t, "--help")
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			out := runHelp(t, append(strings.Fields(c.name), "--help")...)
			if c.run == nil {
				for _, sub := range commands {
					if name, ok := strings.CutPrefix(sub.name, c.name+" "); ok && !strings.Contains(out, "\n  "+name+" ") {
						t.Errorf("the help of %s does not list %s:\n%s", c.name, name, out)
					}
				}
				return
			}
			if !strings.Contains(top, "\n  "+c.name+" ") {
				t.Errorf("arbiter --help does not list %s:\n%s", c.name, top)
			}
			if !strings.HasPrefix(out, "Usage: arbiter "+c.name+" ") || !strings.Contains(out, sentence(c.summary)) {
				t.Errorf("the help does not start with the usage and the summary:\n%s", out)
			}
			for _, s := range config.Settings {
				listed := strings.Contains(out, s.Env+" ") || strings.Contains(out, "env "+s.Env)
				if mine := slices.Contains(c.scopes, s.Scope); listed != mine {
					t.Errorf("%s listed = %v, want %v:\n%s", s.Env, listed, mine, out)
				}
				if s.Flag != "" && slices.Contains(c.scopes, s.Scope) &&
					!strings.Contains(out, "--"+s.Flag+" ") {
					t.Errorf("--%s is not listed:\n%s", s.Flag, out)
				}
				if s.Default != "" && slices.Contains(c.scopes, s.Scope) && !strings.Contains(out, "default "+s.Default) {
					t.Errorf("the default of %s, %s, is not shown:\n%s", s.Env, s.Default, out)
				}
			}
			for _, v := range c.env {
				if !strings.Contains(out, v.name) {
					t.Errorf("%s is not listed:\n%s", v.name, out)
				}
			}
		})
	}
}

// recordingEnv is a getenv that remembers the names it was asked for.
type recordingEnv struct {
	vars map[string]string
	mu   sync.Mutex
	read map[string]bool
}

func (e *recordingEnv) getenv(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.read == nil {
		e.read = map[string]bool{}
	}
	e.read[name] = true
	return e.vars[name]
}

func (e *recordingEnv) names() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for name := range e.read {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// runUntilLogged runs a long-running command until its log holds line,
// then stops it.
func runUntilLogged(t *testing.T, getenv func(string) string, line string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, getenv, nil, &bytes.Buffer{}, logs) }()
	for deadline := testutil.Patience(t); !strings.Contains(logs.String(), line); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("arbiter %s stopped: %v\n%s", strings.Join(args, " "), err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("arbiter %s did not log %q:\n%s", strings.Join(args, " "), line, logs.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("arbiter %s returned %v", strings.Join(args, " "), err)
	}
}

// TestRun_HelpListsEveryVariableRead runs each command and checks that every
// environment variable it read is in its help, so a setting read anywhere
// but through config.Settings or the command's env shows up here.
func TestRun_HelpListsEveryVariableRead(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error": "the API key is not valid"}`))
	}))
	defer api.Close()
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	for _, tc := range []struct {
		cmd  string
		args []string
		vars map[string]string
		// start, for a long-running command, is the log line after which it
		// is stopped.
		start string
		fails bool
	}{
		// --addr overrides a listen address that could not be used.
		{cmd: "serve", args: []string{"--addr", "127.0.0.1:0"}, start: "msg=listening",
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL, "ARBITER_ADDR": "256.0.0.1:99999"}},
		// worker and the admin commands do not read the server's settings,
		// so a bad one does not stop them.
		{cmd: "worker", start: "msg=\"worker started\"",
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL, "ARBITER_SESSION_SECRET": "short"}},
		{cmd: "migrate",
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL, "ARBITER_WORKERS": "many"}},
		{cmd: "admin create-key", args: []string{"--email", "ops@example.com"},
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL, "ARBITER_WORKERS": "many", "ARBITER_SESSION_SECRET": "short"}},
		{cmd: "admin list-keys", args: []string{"--email", "ops@example.com"},
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL}},
		{cmd: "admin set-cap", args: []string{"--email", "ops@example.com", "--cap", "5"},
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL}},
		{cmd: "admin revoke-key", args: []string{"--id", "key_0000000000000000"}, fails: true,
			vars: map[string]string{"ARBITER_DATABASE_URL": dbURL}},
		{cmd: "task create", args: []string{"--prompt", "Refund?", "--verdict", "approve"}, fails: true,
			vars: map[string]string{"SVC_API_KEY": "svc_live_x", "SVC_BASE_URL": api.URL}},
		{cmd: "task get", args: []string{"tsk_1"}, fails: true,
			vars: map[string]string{"SVC_API_KEY": "svc_live_x", "SVC_BASE_URL": api.URL}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			e := &recordingEnv{vars: tc.vars}
			args := append(strings.Fields(tc.cmd), tc.args...)
			if tc.start != "" {
				runUntilLogged(t, e.getenv, tc.start, args...)
			} else {
				var stdout, stderr bytes.Buffer
				err := run(context.Background(), args, e.getenv, nil, &stdout, &stderr)
				if (err != nil) != tc.fails {
					t.Fatalf("arbiter %s = %v\n%s", strings.Join(args, " "), err, stderr.String())
				}
			}
			name := strings.Fields(tc.cmd)
			help := runHelp(t, append(name, "--help")...)
			if len(e.names()) == 0 {
				t.Fatal("the command read no environment variable")
			}
			for _, read := range e.names() {
				if !strings.Contains(help, read) {
					t.Errorf("arbiter %s reads %s, which its help does not list:\n%s", strings.Join(name, " "), read, help)
				}
			}
		})
	}
}

// TestConfigurationDoc_ListsEverySetting keeps docs/configuration.md in
// step with config.Settings and the task commands' environment: every
// server setting is a row of the one server table (a paragraph inside it
// would split it in two, and the rows after it would render as text), with
// its fallback and flag in that row, and every client variable is a row of
// the client table.
func TestConfigurationDoc_ListsEverySetting(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := markdownTables(string(doc))
	if len(tables) != 2 {
		t.Fatalf("docs/configuration.md holds %d tables, want 2 (the server's settings, the client commands')", len(tables))
	}
	server, clients := tables[0], tables[1]
	for _, s := range config.Settings {
		row := tableRow(server, s.Env)
		if row == "" {
			t.Errorf("the server table of docs/configuration.md has no row for %s", s.Env)
			continue
		}
		if s.Fallback != "" && !strings.Contains(row, "`"+s.Fallback+"`") {
			t.Errorf("the row of %s does not name its fallback %s", s.Env, s.Fallback)
		}
		if s.Flag != "" && !strings.Contains(row, "`--"+s.Flag+"`") {
			t.Errorf("the row of %s does not name its flag --%s", s.Env, s.Flag)
		}
	}
	for _, v := range clientEnv {
		if tableRow(clients, v.name) == "" {
			t.Errorf("the client table of docs/configuration.md has no row for %s", v.name)
		}
	}
}

// markdownTables returns the Markdown tables of doc, each as its rows
// (the lines from its header to the last line starting with "|").
func markdownTables(doc string) [][]string {
	var tables [][]string
	var rows []string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
			continue
		}
		if rows != nil {
			tables = append(tables, rows)
			rows = nil
		}
	}
	if rows != nil {
		tables = append(tables, rows)
	}
	return tables
}

// tableRow returns the row of table whose first cell names `name`, or "".
func tableRow(table []string, name string) string {
	for _, row := range table {
		cells := strings.Split(row, "|")
		if len(cells) > 1 && strings.Contains(cells[1], "`"+name+"`") {
			return row
		}
	}
	return ""
}

func TestRun_BadUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"nonsense"},
		{"--nonsense"},
		{"serve", "--nonsense"},
		{"serve", "extra"},
		{"serve", "--addr"},
		{"worker", "--addr", "127.0.0.1:0"},
		{"migrate", "--email", "ops@example.com"},
		{"admin"},
		{"admin", "frobnicate"},
		{"admin", "create-key", "--id", "key_0000000000000000"},
		{"admin", "list-keys", "--name", "ci"},
		{"task"},
		{"task", "delete"},
		{"task", "create", "--email", "ops@example.com"},
		{"task", "get"},
		{"task", "get", "tsk_1", "tsk_2"},
		{"version", "--short"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, brokenEnv, nil, &stdout, &stderr)
			if !errors.Is(err, errUsage) {
				t.Errorf("err = %v, want the usage error", err)
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
			if !strings.Contains(stderr.String(), "Usage: arbiter") {
				t.Errorf("stderr has no usage:\n%s", stderr.String())
			}
			if lines := strings.Count(stderr.String(), "\n"); lines > 4 {
				t.Errorf("stderr has %d lines, want a short usage:\n%s", lines, stderr.String())
			}
		})
	}
}

func TestRun_Version(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out := runHelp(t, args...)
		if !strings.HasPrefix(out, "arbiter ") || strings.Count(out, "\n") != 1 ||
			!strings.Contains(out, runtime.Version()) {
			t.Errorf("arbiter %s printed %q, want one line naming the Go version", args[0], out)
		}
	}
}

func TestVersionLine(t *testing.T) {
	t.Parallel()
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		info    *debug.BuildInfo
		stamped buildStamp
		want    string
	}{
		{nil, buildStamp{}, "arbiter (devel) " + runtime.Version() + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, buildStamp{},
			"arbiter (devel) go1.26.8" + platform},
		// make dist stamps the version and commit; -trimpath and
		// -buildvcs=false leave no VCS settings.
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			buildStamp{version: "v1.5.0", commit: "2f8bfeb0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6"},
			"arbiter v1.5.0 (commit 2f8bfeb0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6) go1.26.8" + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "2f8bfeb0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}, buildStamp{}, "arbiter v1.4.0 (revision 2f8bfeb0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6, 2026-01-02T03:04:05Z, modified) go1.26.8" + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "2f8bfeb"}, {Key: "vcs.modified", Value: "false"},
		}}, buildStamp{}, "arbiter (devel) (revision 2f8bfeb) go1.26.8" + platform},
	} {
		if got := versionLine(tc.info, tc.stamped); got != tc.want {
			t.Errorf("versionLine = %q, want %q", got, tc.want)
		}
	}
}
