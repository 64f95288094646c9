package deploy_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestLicense_NamedEverywhere: the repository is under the Apache License
// 2.0 (LICENSE), and every place that tells a user the licence names it:
// the API document's info.license, the Python and TypeScript SDKs'
// package metadata, the Helm chart, the image's label (the Dockerfile's,
// which cmd/arbiter-image's tests hold to the builder's).
func TestLicense_NamedEverywhere(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if l := read("../LICENSE"); !strings.Contains(l, "Apache License") || !strings.Contains(l, "Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0")
	}
	var doc struct {
		Info struct {
			License struct{ Name, Identifier string } `json:"license"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(read("../openapi/openapi.json")), &doc); err != nil || doc.Info.License.Identifier != "Apache-2.0" {
		t.Errorf("openapi.json info.license = %+v (%v), want Apache-2.0", doc.Info.License, err)
	}
	var pkg struct{ License string }
	if err := json.Unmarshal([]byte(read("../sdk/typescript/package.json")), &pkg); err != nil || pkg.License != "Apache-2.0" {
		t.Errorf("sdk/typescript/package.json license = %q (%v)", pkg.License, err)
	}
	for path, want := range map[string]string{
		"../sdk/python/pyproject.toml":    `license = { text = "Apache-2.0" }`,
		"helm/arbiter/Chart.yaml":         "artifacthub.io/license: Apache-2.0",
		"../cmd/arbiter-image/Dockerfile": `LABEL org.opencontainers.image.licenses="Apache-2.0"`,
	} {
		if !strings.Contains(read(path), want) {
			t.Errorf("%s does not say %s", path, want)
		}
	}
}
