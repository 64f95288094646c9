package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter/openapi"
)

// OpenAPI handles GET /v1/openapi.json: the API's OpenAPI 3.1 document, no
// authentication.
func OpenAPI() http.Handler {
	doc := openapi.Document()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(doc)
	})
}
