package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/openapi"
)

// The document's own examples must type-check against the TypeScript types
// openapi-typescript makes from it, under tsc --strict: an example that a
// generated client could not hold as its type means a schema that says
// less (or other) than the server sends. Both tools come from the locked
// Node packages (package.json); without them the test skips, except in CI
// (CI set), where `make generate-check` has installed them.
func TestDocument_ExamplesTypeCheckInTypeScript(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tsc takes tens of seconds; make test runs it")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"openapi-typescript", "typescript"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", pkg, "package.json")); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("node_modules/%s is missing; run npm ci", pkg)
			}
			t.Skipf("node_modules/%s is missing; npm ci installs it", pkg)
		}
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(doc, openapi.Document(), 0o644); err != nil {
		t.Fatal(err)
	}
	examples, n, err := examplesTS(openapi.Document())
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("found %d examples; the walk misses most of the document", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "examples.ts"), []byte(examples), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	npx := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "npx", append([]string{"--no-install"}, args...)...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("npx %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
		}
	}
	npx("openapi-typescript", doc, "--output", filepath.Join(dir, "arbiter.ts"))
	npx("tsc", "--strict", "--noEmit", "--target", "es2022", "--module", "es2022", "--moduleResolution", "bundler",
		filepath.Join(dir, "examples.ts"))
}

// untypedInTypeScript are the paths and schemas whose examples the
// TypeScript check leaves out: none, now that the MCP messages' params and
// result are typed. A schema openapi-typescript cannot type would go here,
// with the reason.
var untypedInTypeScript = map[string]bool{}

// examplesTS returns a TypeScript module that assigns each example of the
// document (a schema's, a request body's, an answer's) to the type
// openapi-typescript gives it, and how many it holds.
func examplesTS(document []byte) (string, int, error) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas   map[string]struct{ Example json.RawMessage } `json:"schemas"`
			Examples  map[string]struct{ Value json.RawMessage }   `json:"examples"`
			Responses map[string]json.RawMessage                   `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(document, &doc); err != nil {
		return "", 0, err
	}
	type media struct {
		Example  json.RawMessage `json:"example"`
		Examples map[string]struct {
			Value json.RawMessage `json:"value"`
			Ref   string          `json:"$ref"`
		} `json:"examples"`
	}
	type content struct {
		Content map[string]media `json:"content"`
	}
	var b strings.Builder
	b.WriteString("import type { paths, components } from \"./arbiter\";\n\n")
	n := 0
	add := func(typ string, value json.RawMessage) {
		n++
		fmt.Fprintf(&b, "export const example%d: %s = %s;\n\n", n, typ, value)
	}
	addMedia := func(typ string, m media) {
		if len(m.Example) > 0 {
			add(typ, m.Example)
		}
		for _, name := range sortedKeys(m.Examples) {
			e := m.Examples[name]
			if ref, ok := strings.CutPrefix(e.Ref, "#/components/examples/"); ok {
				e.Value = doc.Components.Examples[ref].Value
			}
			if len(e.Value) > 0 {
				add(typ, e.Value)
			}
		}
	}
	for _, name := range sortedKeys(doc.Components.Schemas) {
		if ex := doc.Components.Schemas[name].Example; len(ex) > 0 && !untypedInTypeScript[name] {
			add(fmt.Sprintf("components[\"schemas\"][%q]", name), ex)
		}
	}
	for _, name := range sortedKeys(doc.Components.Responses) {
		var r content
		if err := json.Unmarshal(doc.Components.Responses[name], &r); err != nil {
			return "", 0, err
		}
		for _, mt := range sortedKeys(r.Content) {
			addMedia(fmt.Sprintf("components[\"responses\"][%q][\"content\"][%q]", name, mt), r.Content[mt])
		}
	}
	for _, path := range sortedKeys(doc.Paths) {
		if untypedInTypeScript[path] {
			continue
		}
		for _, method := range sortedKeys(doc.Paths[path]) {
			var op struct {
				RequestBody *content           `json:"requestBody"`
				Responses   map[string]content `json:"responses"`
			}
			if json.Unmarshal(doc.Paths[path][method], &op) != nil {
				continue // parameters, or another member that is no operation
			}
			at := fmt.Sprintf("paths[%q][%q]", path, method)
			if op.RequestBody != nil {
				for _, mt := range sortedKeys(op.RequestBody.Content) {
					addMedia(fmt.Sprintf("NonNullable<%s[\"requestBody\"]>[\"content\"][%q]", at, mt), op.RequestBody.Content[mt])
				}
			}
			for _, status := range sortedKeys(op.Responses) {
				key := strconv.Quote(status)
				if _, err := strconv.Atoi(status); err == nil {
					key = status
				}
				for _, mt := range sortedKeys(op.Responses[status].Content) {
					addMedia(fmt.Sprintf("%s[\"responses\"][%s][\"content\"][%q]", at, key, mt), op.Responses[status].Content[mt])
				}
			}
		}
	}
	return b.String(), n, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
