package arbiter_test

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestPackageDoc_NamesEveryFile keeps the package doc (arbiter.go) a true
// map of the package: every file of the root package is named in it, under
// its topic, and every file it names exists.
func TestPackageDoc_NamesEveryFile(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "arbiter.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("arbiter.go has no package doc")
	}
	named := map[string]bool{}
	for _, name := range regexp.MustCompile(`\b[a-z0-9_]+\.go\b`).FindAllString(f.Doc.Text(), -1) {
		named[name] = true
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{"arbiter.go": true} // "this file" in the doc
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			files[name] = true
		}
	}
	var missing, gone []string
	for name := range files {
		if !named[name] && name != "arbiter.go" {
			missing = append(missing, name)
		}
	}
	for name := range named {
		if !files[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(gone)
	if len(missing) > 0 {
		t.Errorf("the package doc in arbiter.go does not name %s: add each under its topic", strings.Join(missing, ", "))
	}
	if len(gone) > 0 {
		t.Errorf("the package doc in arbiter.go names %s, which the package does not have", strings.Join(gone, ", "))
	}
	if len(files) < 20 {
		t.Errorf("found %d files in the root package; the test reads the wrong directory", len(files))
	}
}
