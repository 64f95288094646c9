package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// endpoint is a model provider's HTTP API: where requests go, how they
// carry the key, how a throttled answer looks, and the limiter that paces
// them.
type endpoint struct {
	url       string
	apiKey    string
	authorize func(h http.Header, key string) // sets the key on a request
	header    http.Header                     // sent with every request
	client    *http.Client
	limiter   RateLimiter
	// throttled reports whether an answer throttles the call, and the
	// wait it asks for (0 when it does not say).
	throttled func(res *http.Response, body []byte) (time.Duration, bool)
}

// post sends body to the model server and returns its successful answer.
func (o *endpoint) post(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err == nil {
		// The provider continues the worker's trace (traceparent).
		telemetry.Inject(ctx, req.Header)
	}
	if err != nil {
		return nil, failed(arbiter.VerifierFailed, fmt.Errorf("build the model request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range o.header {
		req.Header[k] = v
	}
	if o.apiKey != "" {
		o.authorize(req.Header, o.apiKey)
	}
	sent := o.limiter.Sent()
	res, err := o.client.Do(req)
	if err != nil {
		return nil, o.callError(ctx, "call the model server", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes+1))
	if err != nil {
		return nil, o.callError(ctx, "read the model server's answer", err)
	}
	if wait, ok := o.throttled(res, raw); ok {
		wait = o.limiter.Throttled(sent, wait)
		return nil, &arbiter.ThrottledError{RetryAfter: wait,
			Err: fmt.Errorf("%s answered %s (Retry-After %q): %s", o.url, res.Status, res.Header.Get("Retry-After"), o.excerpt(raw))}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, failed(arbiter.VerifierHTTPStatus(res.StatusCode),
			fmt.Errorf("%s answered %s: %s", o.url, res.Status, o.excerpt(raw)))
	}
	o.limiter.Succeeded()
	if len(raw) > maxResponseBytes {
		return nil, failed(arbiter.VerifierUnreadable, fmt.Errorf("the model server's answer is larger than %d bytes", maxResponseBytes))
	}
	return raw, nil
}

// callError explains a failed call: the deadline passed, the caller gave
// up, or the transport failed. The API key never appears in it.
func (o *endpoint) callError(ctx context.Context, doing string, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failed(arbiter.VerifierTimedOut, fmt.Errorf("%s: the model server did not answer in time: %w", doing, ctx.Err()))
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", doing, ctx.Err())
	}
	return failed(arbiter.VerifierUnreachable, fmt.Errorf("%s: %s", doing, o.redact(err.Error())))
}

// excerpt shortens a model server's text for an error message, on one line,
// with the API key blanked out should the server echo it.
func (o *endpoint) excerpt(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	s = o.redact(s)
	if len(s) <= maxExcerptBytes {
		return s
	}
	cut := maxExcerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// redact blanks out the API key in s.
func (o *endpoint) redact(s string) string {
	if o.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, o.apiKey, "[api key]")
}
