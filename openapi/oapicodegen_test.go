package openapi_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/openapi"
)

// oapiCodegen is the generator a Go user of the API most likely runs, at a
// pinned version; the module proxy serves it, and after the first run it
// comes from the module cache.
const oapiCodegen = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"

// A Go user's first `go generate` must give code that compiles: oapi-codegen,
// with its defaults (types, an echo server, a client and the embedded
// document), writes the document's Go, and go vet checks it in a module of
// its own (testdata/oapicodegen pins what the code imports). Its pruning
// drops components no path references, so a schema or parameter that only
// webhooks use would leave the webhooks' types undefined.
func TestDocument_GeneratesCompilingGo(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("testdata", "oapicodegen", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), openapi.Document(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out.Bytes())
		}
	}
	run("run", oapiCodegen, "-package", "arbiterapi", "-o", "arbiterapi.gen.go", "openapi.json")
	run("vet", ".")
}
