package slackfake

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// socketServer is the fake's Socket Mode side: it says hello to each
// connection, sends envelopes to the latest one and records the acks.
type socketServer struct {
	mu          sync.Mutex
	conn        *websocket.Conn
	connections int
	acks        map[string]bool
	changed     chan struct{}
}

func (f *Fake) sock() *socketServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.socket == nil {
		f.socket = &socketServer{acks: map[string]bool{}, changed: make(chan struct{})}
	}
	return f.socket
}

func (s *socketServer) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (f *Fake) serveSocket(w http.ResponseWriter, r *http.Request) {
	s := f.sock()
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.conn = conn
	s.connections++
	err = conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "AFAKE"}, "debug_info": map[string]any{"host": "fake"}})
	s.notify()
	s.mu.Unlock()
	if err != nil {
		return
	}
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) == nil && ack.EnvelopeID != "" {
			s.mu.Lock()
			s.acks[ack.EnvelopeID] = true
			s.notify()
			s.mu.Unlock()
		}
	}
}

// WaitSocket waits until the fake has had n Socket Mode connections, or
// fails the test after 30 s.
func (f *Fake) WaitSocket(t testing.TB, n int) {
	t.Helper()
	s := f.sock()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		got, ch := s.connections, s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waited 30 s for %d Socket Mode connections; got %d", n, got)
		}
	}
}

// SendInteraction sends an interaction envelope over the latest socket.
func (f *Fake) SendInteraction(t testing.TB, envelopeID string, payload any) {
	t.Helper()
	s := f.sock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		t.Fatal("no Socket Mode connection to send on")
	}
	if err := s.conn.WriteJSON(map[string]any{"envelope_id": envelopeID, "type": "interactive",
		"accepts_response_payload": false, "payload": payload}); err != nil {
		t.Fatalf("send envelope: %v", err)
	}
}

// WaitAck waits until the envelope is acknowledged, or fails the test
// after 30 s.
func (f *Fake) WaitAck(t testing.TB, envelopeID string) {
	t.Helper()
	s := f.sock()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		ok, ch := s.acks[envelopeID], s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waited 30 s for the ack of envelope %s", envelopeID)
		}
	}
}

// DropSocket closes the latest Socket Mode connection from the server's
// side, as Slack does when it refreshes one.
func (f *Fake) DropSocket() {
	s := f.sock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}
