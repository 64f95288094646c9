package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/openapi"
)

// The generators a team that adopts the API reaches for besides oapi-codegen
// and openapi-typescript, at the versions openapi/testdata/generators
// pins (make generator-deps installs them into its .venv): each writes a
// client from the document as served, and that client creates, reads and
// lists a task on a real `arbiter serve` (ARBITER_BIN, or built here),
// through a small program in its language in testdata/generators. Without
// the generators, Java or the Node packages the test skips, except in CI
// (CI set), where .ci/run installs them.
func TestDocument_GeneratedClientsCallTheServer(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "openapi", "testdata", "generators")
	venv := filepath.Join(data, ".venv", "bin")
	missing := func(what string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing; make generator-deps installs it", what)
		}
		t.Skipf("%s is missing; make generator-deps installs it", what)
	}
	for _, tool := range []string{"openapi-python-client", "openapi-generator-cli", "python"} {
		if _, err := os.Stat(filepath.Join(venv, tool)); err != nil {
			missing(filepath.Join("openapi/testdata/generators/.venv/bin", tool))
		}
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing("java (openapi-generator's jar needs Java 11 or later)")
	}
	tsc := filepath.Join(root, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		missing("node_modules/.bin/tsc")
	}

	dir := t.TempDir()
	document := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(document, openapi.Document(), 0o644); err != nil {
		t.Fatal(err)
	}
	server := startServer(t, root, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := func(t *testing.T, cwd string, env []string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = cwd
		cmd.Env = append(append(os.Environ(), "PATH="+venv+string(os.PathListSeparator)+os.Getenv("PATH")), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
		}
		return stdout.Bytes()
	}
	generate := func(t *testing.T, generator, out string, extra ...string) {
		t.Helper()
		run(t, dir, nil, filepath.Join(venv, "openapi-generator-cli"),
			append([]string{"generate", "-i", document, "-g", generator, "-o", out}, extra...)...)
	}

	for _, c := range []struct {
		name string
		// live writes the client and runs the program that uses it with
		// the server's address, a key and a source; it returns the
		// program's output.
		live func(t *testing.T, work, source string) []byte
	}{
		{"openapi-python-client", func(t *testing.T, work, source string) []byte {
			pkg := filepath.Join(work, "arbiter_client")
			run(t, work, nil, filepath.Join(venv, "openapi-python-client"), "generate", "--path", document, "--output-path", pkg, "--meta", "none")
			return run(t, work, nil, filepath.Join(venv, "python"), filepath.Join(data, "openapi_python_client_live.py"),
				work, server.url, server.key, source)
		}},
		{"openapi-generator/python", func(t *testing.T, work, source string) []byte {
			generate(t, "python", work)
			return run(t, work, nil, filepath.Join(venv, "python"), filepath.Join(data, "openapi_generator_python_live.py"),
				work, server.url, server.key, source)
		}},
		{"openapi-generator/typescript-fetch", func(t *testing.T, work, source string) []byte {
			generate(t, "typescript-fetch", filepath.Join(work, "client"))
			copyFile(t, filepath.Join(data, "typescript_fetch_live.ts"), filepath.Join(work, "live.ts"))
			run(t, work, nil, tsc, "--strict", "--target", "es2022", "--module", "commonjs", "--moduleResolution", "node",
				"--skipLibCheck", "--types", "node", "--typeRoots", filepath.Join(root, "node_modules", "@types"), "--outDir", "out", "live.ts")
			return run(t, work, nil, "node", filepath.Join("out", "live.js"), server.url, server.key, source)
		}},
		{"openapi-generator/go", func(t *testing.T, work, source string) []byte {
			generate(t, "go", filepath.Join(work, "client"), "--git-user-id", "arbiterhq", "--git-repo-id", "arbiter-openapi-go",
				"-p", "packageName=arbiterclient")
			for _, f := range []string{"go.mod", "go.sum", "main.go"} {
				copyFile(t, filepath.Join(data, "go", f), filepath.Join(work, f))
			}
			// Its own tests import testify, which the pinned module leaves out.
			if err := os.RemoveAll(filepath.Join(work, "client", "test")); err != nil {
				t.Fatal(err)
			}
			return run(t, work, []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, "go", "run", ".", server.url, server.key, source)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			work := filepath.Join(dir, strings.ReplaceAll(c.name, "/", "-"))
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			source := "generated-" + strings.ReplaceAll(c.name, "/", "-")
			var got struct {
				ID, Read, Prompt, Status string
				Listed                   []string
			}
			out := c.live(t, work, source)
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("the program's output is not its JSON: %v\n%s", err, out)
			}
			if !strings.HasPrefix(got.ID, "tsk_") || got.Read != got.ID || !slices.Equal(got.Listed, []string{got.ID}) {
				t.Errorf("create, get and list saw %+v", got)
			}
			// The server holds the task the program made, as it made it. Its
			// status moves on while the program runs (the server's worker
			// hands it to a person), so the program's status is one the new
			// task had: before a person, never final.
			stored := server.task(t, got.ID)
			if stored.Source != source || stored.Prompt != got.Prompt || !strings.Contains(stored.Prompt, strings.Split(c.name, "/")[0]) {
				t.Errorf("the server holds %+v; the program saw %+v", stored, got)
			}
			if !slices.Contains([]string{"pending", "agent_running", "human_needed"}, got.Status) || stored.Status != "human_needed" && stored.Status != got.Status {
				t.Errorf("the program saw the status %q, the server holds %q", got.Status, stored.Status)
			}
		})
	}
}

// liveServer is an `arbiter serve` on a free loopback port with a SQLite
// store, and an account's key.
type liveServer struct {
	url, key string
}

// startServer runs `arbiter serve` (ARBITER_BIN, or built from root into
// dir) until the test ends.
func startServer(t *testing.T, root, dir string) liveServer {
	t.Helper()
	bin := os.Getenv("ARBITER_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "arbiter")
		build := exec.Command("go", "build", "-o", bin, "./cmd/arbiter")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := append(os.Environ(), "ARBITER_ADDR="+addr, "ARBITER_DATABASE_URL=sqlite:"+filepath.Join(dir, "arbiter.db"))
	var log bytes.Buffer
	serve := exec.Command(bin, "serve")
	serve.Env, serve.Stdout, serve.Stderr = env, &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		<-exited
	})
	url := "http://" + addr
	for {
		res, err := http.Get(url + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("arbiter serve exited (%v):\n%s", err, log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	create := exec.Command(bin, "admin", "create-key", "--email", "generators@example.com")
	create.Env = env
	key, err := create.Output()
	if err != nil {
		t.Fatalf("admin create-key: %v", err)
	}
	return liveServer{url: url, key: strings.TrimSpace(string(key))}
}

// task reads a task as the API answers it.
func (s liveServer) task(t *testing.T, id string) (task struct{ Source, Prompt, Status string }) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/tasks/%s", s.url, id), nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&task) != nil {
		t.Fatalf("GET /v1/tasks/%s = %d", id, res.StatusCode)
	}
	return task
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
