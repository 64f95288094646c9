// Package openapitest validates HTTP exchanges against the OpenAPI document
// in tests.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/arbiterhq/arbiter/openapi"
)

var (
	loadOnce sync.Once
	router   routers.Router
	loadErr  error
)

// Load parses and validates the document.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return doc, nil
}

func load() (routers.Router, error) {
	loadOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", jsonLinesDecoder)
		var doc *openapi3.T
		if doc, loadErr = Load(); loadErr == nil {
			// The router would match requests against the document's
			// servers and skip every other origin as undocumented; the
			// tests' servers listen on ports of their own.
			doc.Servers = nil
			router, loadErr = legacy.NewRouter(doc)
		}
	})
	return router, loadErr
}

// jsonLinesDecoder reads a JSON Lines body (the audit export's) as the
// string the document's schema describes, once each of its lines is
// checked to be one JSON value.
func jsonLinesDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if !json.Valid(line) {
			return nil, fmt.Errorf("line %d is not JSON", i+1)
		}
	}
	return string(b), nil
}

// ValidateResponse fails t when the response to req (status, header and
// body) does not match the document. Requests to paths the document does not
// describe, or with a method it does not list (on the path as it is, when the
// document lists it, rather than a template that also matches), are not
// checked.
func ValidateResponse(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	r, err := load()
	if err != nil {
		t.Fatalf("openapi document: %v", err)
		return
	}
	route, params, err := r.FindRoute(req)
	var routeErr *routers.RouteError
	if errors.As(err, &routeErr) && (routeErr.Reason == routers.ErrPathNotFound.Error() ||
		routeErr.Reason == routers.ErrMethodNotAllowed.Error()) {
		return // an undocumented path or method: a 404 or 405 the router answers
	} else if err != nil {
		t.Fatalf("openapi route for %s %s: %v", req.Method, req.URL, err)
		return
	}
	if route.Path != req.URL.Path && route.Spec.Paths.Value(req.URL.Path) != nil {
		// A path the document lists as it is wins over a template that
		// also matches it (GET /v1/tasks/batch is no GET /v1/tasks/{id}):
		// the method is one that path does not list.
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s → %d does not match the OpenAPI document: %v\nbody: %s", req.Method, req.URL.Path, status, err, body)
	}
}
