package handlers

import (
	"net/http"
	"strings"
)

// OAuthProtectedResource handles GET /.well-known/oauth-protected-resource
// (and the same with /v1/mcp after it, where RFC 9728 clients look first):
// the OAuth 2.0 Protected Resource Metadata of /v1/mcp, saying that it
// takes a bearer token in the Authorization header and names no
// authorization server. The MCP authorization spec has a client that meets
// a 401 look here; what it learns is that there is no OAuth to do: the
// bearer token is an API key from the dashboard or `arbiter admin
// create-key`.
func OAuthProtectedResource(baseURL string) http.Handler {
	type metadata struct {
		Resource               string   `json:"resource"`
		ResourceName           string   `json:"resource_name"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ResourceDocumentation  string   `json:"resource_documentation"`
	}
	base := strings.TrimSuffix(baseURL, "/")
	answer := metadata{
		Resource:               base + "/v1/mcp",
		ResourceName:           "Arbiter MCP (API keys only: send Authorization: Bearer svc_live_…; there is no OAuth)",
		BearerMethodsSupported: []string{"header"},
		AuthorizationServers:   []string{},
		ResourceDocumentation:  base + "/v1/openapi.json",
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		JSON(w, http.StatusOK, answer)
	})
}
