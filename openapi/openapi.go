// Package openapi holds the OpenAPI 3.1 document of Arbiter's public API. It
// is served at GET /v1/openapi.json, and the API tests validate every
// response against it, so it cannot drift from the code.
package openapi

import _ "embed"

//go:embed openapi.json
var document []byte

// Document returns the OpenAPI document as JSON.
func Document() []byte { return document }
