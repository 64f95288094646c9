// Package static holds the dashboard's built assets: the Tailwind CSS, the
// vendored htmx, the small scripts and the favicon. They are committed and embedded,
// so `go build` needs no Node. `make generate` rebuilds them.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"strings"
)

//go:embed app.css app.js htmx.min.js review.js favicon.svg
var files embed.FS

// fingerprints maps each file's name to the start of its SHA-256.
var fingerprints = func() map[string]string {
	m := map[string]string{}
	entries, _ := files.ReadDir(".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		sum := sha256.Sum256(b)
		m[e.Name()] = hex.EncodeToString(sum[:6])
	}
	return m
}()

// Prefix is the path the files are served under.
const Prefix = "/static/"

// Path returns the URL path of the named file with its fingerprint as the
// query, so a new build gets a new URL and the old one can be cached for good.
func Path(name string) string { return Prefix + name + "?v=" + fingerprints[name] }

// Handler serves the files under Prefix. A request naming the current
// fingerprint is cacheable for a year; any other asks for revalidation.
func Handler() http.Handler {
	fs := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		fp, ok := fingerprints[name]
		if !ok || path.Clean(name) != name {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("v") == fp {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		w.Header().Set("ETag", `"`+fp+`"`)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fs.ServeHTTP(w, r)
	})
}
