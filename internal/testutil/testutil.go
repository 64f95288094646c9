// Package testutil holds the small helpers that tests of several packages
// share. It is imported by tests only.
package testutil

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is an io.Writer safe for concurrent use: a log sink that a
// server's or a worker's goroutines write while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reset empties the buffer.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// APICall sends an API request with the key as a bearer token and decodes
// the JSON answer; an answer that is not a JSON object decodes to nil.
func APICall(t testing.TB, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	json.NewDecoder(res.Body).Decode(&v)
	return res.StatusCode, v
}

// Patience is the time until which a test waits for a state it expects (a
// server listening, a row written, a goroutine parked) before it fails:
// shortly before the test binary's own -timeout, so that a slow, loaded
// machine only slows a test down, while a state that never comes still
// fails with the test's own message rather than the binary's timeout panic.
// A test that asserts a bound on time keeps its own bound instead.
func Patience(t *testing.T) time.Time {
	deadline, ok := t.Deadline()
	if !ok {
		return time.Now().Add(10 * time.Minute)
	}
	// The margin leaves the failing test time to print its log and to run
	// its cleanups before the binary's timeout.
	return deadline.Add(-30 * time.Second)
}
