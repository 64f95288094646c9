// Package slackfake is a fake Slack for tests: a Web API on httptest
// that records every call and answers as Slack does (posts, updates,
// users, modals, 429s), a response_url that records what is answered to
// a click, and a Socket Mode server.
package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is one call the fake received.
type Call struct {
	// Method is the Web API method ("chat.postMessage"), or "response"
	// for a post to a response_url.
	Method string
	// Form holds a form-encoded call's fields; Body is the raw body.
	Form url.Values
	Body string
	At   time.Time
	// Status is what the fake answered.
	Status int
}

// User is a Slack user the fake knows.
type User struct {
	ID, Email      string
	EmailConfirmed bool
}

// Fake is a fake Slack.
type Fake struct {
	// URL is the Web API's root, for slack.NewClient (ends in /api/).
	URL string
	// ResponseURL is a response_url that records its posts.
	ResponseURL string
	srv         *httptest.Server

	mu       sync.Mutex
	calls    []Call
	users    map[string]User
	limited  map[string][]time.Duration // method → Retry-After answers to give, in order
	failures map[string][]string        // method → error codes to answer, in order
	holds    map[string]chan struct{}
	seq      int
	changed  chan struct{}
	socket   *socketServer
}

// New starts a fake Slack, closed when the test ends.
func New(t testing.TB) *Fake {
	f := &Fake{users: map[string]User{}, limited: map[string][]time.Duration{}, failures: map[string][]string{},
		holds: map[string]chan struct{}{}, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL + "/api/"
	f.ResponseURL = f.srv.URL + "/response"
	return f
}

// AddUser makes a user known to users.info.
func (f *Fake) AddUser(u User) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[u.ID] = u
}

// RateLimit makes the next call of method answer 429 with Retry-After.
func (f *Fake) RateLimit(method string, retryAfter time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limited[method] = append(f.limited[method], retryAfter)
}

// Fail makes the next call of method answer {"ok": false, "error": code}.
func (f *Fake) Fail(method, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], code)
}

// Hold makes calls of method wait until release is called.
func (f *Fake) Hold(method string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.holds[method] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.holds, method)
			f.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns the calls of method so far ("" for all).
func (f *Fake) Calls(method string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until at least n calls of method answered 200, or
// fails the test after 30 s, and returns them.
func (f *Fake) WaitCalls(t testing.TB, method string, n int) []Call {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		var ok []Call
		for _, c := range f.calls {
			if c.Method == method && c.Status == http.StatusOK {
				ok = append(ok, c)
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if len(ok) >= n {
			return ok
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waited 30 s for %d successful %s calls; got %d", n, method, len(ok))
		}
	}
}

func (f *Fake) record(c Call) {
	f.calls = append(f.calls, c)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/socket" {
		f.serveSocket(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	c := Call{Body: string(body), At: time.Now(), Status: http.StatusOK}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		c.Form, _ = url.ParseQuery(string(body))
	}
	if r.URL.Path == "/response" {
		c.Method = "response"
		f.mu.Lock()
		f.record(c)
		f.mu.Unlock()
		w.Write([]byte("ok"))
		return
	}
	c.Method = strings.TrimPrefix(r.URL.Path, "/api/")
	f.mu.Lock()
	hold := f.holds[c.Method]
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.limited[c.Method]; len(q) > 0 {
		f.limited[c.Method] = q[1:]
		c.Status = http.StatusTooManyRequests
		f.record(c)
		w.Header().Set("Retry-After", strconv.Itoa(int(q[0].Seconds())))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if q := f.failures[c.Method]; len(q) > 0 {
		f.failures[c.Method] = q[1:]
		f.record(c)
		writeJSON(w, map[string]any{"ok": false, "error": q[0]})
		return
	}
	f.record(c)
	switch c.Method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "team_id": "T0FAKE", "team": "Fake", "user_id": "UBOT"})
	case "chat.postMessage":
		f.seq++
		writeJSON(w, map[string]any{"ok": true, "channel": channelID(c.Form.Get("channel")), "ts": fmt.Sprintf("1700000000.%06d", f.seq)})
	case "chat.update":
		writeJSON(w, map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": c.Form.Get("ts")})
	case "users.info":
		u, ok := f.users[c.Form.Get("user")]
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "user": map[string]any{"id": u.ID, "is_email_confirmed": u.EmailConfirmed,
			"profile": map[string]any{"email": u.Email}}})
	case "views.open":
		writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": "V1"}})
	case "apps.connections.open":
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/socket"})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// channelID is the id the fake gives a channel name: what Slack answers
// to a post is the channel's id, which chat.update takes.
func channelID(channel string) string {
	if strings.HasPrefix(channel, "#") {
		return "C" + strings.ToUpper(strings.NewReplacer("-", "", "_", "").Replace(channel[1:]))
	}
	return channel
}

// ChannelID is the id the fake gives a channel name in its answers.
func ChannelID(channel string) string { return channelID(channel) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
