// Package slackfake is a fake Slack for tests: a Web API on httptest
// that records every call and answers as Slack does (posts, updates,
// users, modals, 429s, a channel's history with its messages' metadata,
// the list of channels), a response_url that records what is answered to
// a click, and a Socket Mode server. A test can run code between a
// call's effect and its answer (After), as a process killed there would
// leave things.
package slackfake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
	// Query is the call's URL query: a response_url's tells one click's
	// answers from another's.
	Query url.Values
	// Status is what the fake answered.
	Status int
}

// Message is a message the fake holds in a channel.
type Message struct {
	TS, Text, Blocks string
	// Metadata is the message's metadata as posted ("" for none).
	Metadata string
	// Updates counts the chat.update calls that rewrote it.
	Updates int
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
	after    map[string]func()
	messages map[string][]*Message // channel id → its messages, oldest first
	names    map[string]string     // channel id → name, of the channels posted to by name
	seq      int
	changed  chan struct{}
	socket   *socketServer
}

// New starts a fake Slack, closed when the test ends.
func New(t testing.TB) *Fake {
	f := &Fake{users: map[string]User{}, limited: map[string][]time.Duration{}, failures: map[string][]string{},
		holds: map[string]chan struct{}{}, after: map[string]func(){}, messages: map[string][]*Message{},
		names: map[string]string{}, changed: make(chan struct{})}
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

// After makes the next successful call of method run fn once its effect
// is in place (a post in its channel) and before it is answered: a
// test's way to kill a process between its call and its record.
func (f *Fake) After(method string, fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after[method] = fn
}

// Messages returns copies of the messages in the channel (its id).
func (f *Fake) Messages(channelID string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for _, m := range f.messages[channelID] {
		out = append(out, *m)
	}
	return out
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
	return f.WaitStatus(t, method, http.StatusOK, n)
}

// WaitAny waits until at least n calls of any of methods answered 200 in
// all, or fails the test after 30 s.
func (f *Fake) WaitAny(t testing.TB, n int, methods ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		got := 0
		for _, c := range f.calls {
			if c.Status == http.StatusOK && slices.Contains(methods, c.Method) {
				got++
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waited 30 s for %d successful calls of %v; got %d", n, methods, got)
		}
	}
}

// WaitStatus waits until at least n calls of method were answered
// status, or fails the test after 30 s, and returns them.
func (f *Fake) WaitStatus(t testing.TB, method string, status, n int) []Call {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		var ok []Call
		for _, c := range f.calls {
			if c.Method == method && c.Status == status {
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
			t.Fatalf("waited 30 s for %d %s calls answered %d; got %d", n, method, status, len(ok))
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
	c := Call{Body: string(body), Query: r.URL.Query(), At: time.Now(), Status: http.StatusOK}
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
	if fn := f.after[c.Method]; fn != nil {
		delete(f.after, c.Method)
		defer fn() // before the deferred unlock: the answer waits for it
	}
	switch c.Method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "team_id": "T0FAKE", "team": "Fake", "user_id": "UBOT"})
	case "chat.postMessage":
		f.seq++
		// Slack's ts is the time of the post, unique in its channel.
		id, ts := channelID(c.Form.Get("channel")), fmt.Sprintf("%d.%06d", time.Now().Unix(), f.seq)
		if name, ok := strings.CutPrefix(c.Form.Get("channel"), "#"); ok {
			f.names[id] = name
		}
		f.messages[id] = append(f.messages[id], &Message{TS: ts, Text: c.Form.Get("text"), Blocks: c.Form.Get("blocks"),
			Metadata: c.Form.Get("metadata")})
		defer writeJSON(w, map[string]any{"ok": true, "channel": id, "ts": ts})
	case "chat.update":
		for _, m := range f.messages[c.Form.Get("channel")] {
			if m.TS == c.Form.Get("ts") {
				m.Text, m.Blocks = c.Form.Get("text"), c.Form.Get("blocks")
				m.Updates++
			}
		}
		writeJSON(w, map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": c.Form.Get("ts")})
	case "conversations.history":
		f.history(w, c.Form)
	case "conversations.list":
		var channels []map[string]any
		for id, name := range f.names {
			channels = append(channels, map[string]any{"id": id, "name": name, "is_channel": true})
		}
		writeJSON(w, map[string]any{"ok": true, "channels": channels, "response_metadata": map[string]any{"next_cursor": ""}})
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

// historyPage is how many messages a page of the fake's history holds at
// most, whatever the limit asked: small, so that paging is exercised.
const historyPage = 3

// history answers conversations.history: the channel's messages at or
// after oldest, newest first, a page at a time, with their metadata
// when include_all_metadata is set. A channel named, not an id, is not
// found, as in Slack.
func (f *Fake) history(w http.ResponseWriter, form url.Values) {
	id := form.Get("channel")
	if strings.HasPrefix(id, "#") {
		writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	oldest, _ := strconv.ParseFloat(form.Get("oldest"), 64)
	var msgs []map[string]any
	all := f.messages[id]
	for i := len(all) - 1; i >= 0; i-- {
		m := all[i]
		if ts, _ := strconv.ParseFloat(m.TS, 64); ts < oldest {
			continue
		}
		out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
		if m.Metadata != "" && form.Get("include_all_metadata") == "1" {
			out["metadata"] = json.RawMessage(m.Metadata)
		}
		msgs = append(msgs, out)
	}
	start, _ := strconv.Atoi(form.Get("cursor"))
	start = min(start, len(msgs))
	end := min(start+historyPage, len(msgs))
	next := ""
	if end < len(msgs) {
		next = strconv.Itoa(end)
	}
	writeJSON(w, map[string]any{"ok": true, "messages": msgs[start:end], "has_more": next != "",
		"response_metadata": map[string]any{"next_cursor": next}})
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

// Signed returns the headers with which Slack signs body with an app's
// signing secret at a time.
func Signed(body []byte, secret string, at time.Time) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":" + string(body)))
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
