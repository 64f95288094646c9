package web_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHTTPPackages_ImportNoStoreWorkerOrAgent keeps the HTTP packages (web,
// handlers, views) apart from the store, the worker and the verifier
// backends, directly or through any package they import: they reach them
// only through the root package's service interfaces, which cmd/arbiter
// fills, and they read their settings from config.
func TestHTTPPackages_ImportNoStoreWorkerOrAgent(t *testing.T) {
	const module = "github.com/arbiterhq/arbiter"
	goBin, err := exec.LookPath("go") // go test puts its own first on PATH
	if err != nil {
		t.Fatalf("no go command to list the imports with: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		module+"/web", module+"/handlers", module+"/views/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := map[string]bool{module + "/db": true, module + "/worker": true, module + "/agent": true}
	var listed int
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		listed++
		for _, imported := range fields[1:] {
			if forbidden[imported] {
				t.Errorf("%s imports %s", fields[0], imported)
			}
		}
	}
	if listed < 10 {
		t.Fatalf("go list named %d packages, want the HTTP packages and their imports:\n%s", listed, out)
	}
}
