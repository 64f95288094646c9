// Package mailtest is an SMTP server in the test's own process that keeps
// every message it receives, for tests of the mail the program sends.
package mailtest

import (
	"bytes"
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"
)

// Message is one mail received: its recipient, subject and decoded body,
// with "\n" line ends.
type Message struct{ To, Subject, Body string }

// Sink is a running SMTP server; Addr is its host:port.
type Sink struct {
	Addr string

	mu       sync.Mutex
	got      []Message
	refuse   int // the code every recipient is refused with; 0 accepts
	refused  int // how many recipients were refused
	received chan struct{}
	// conns are the sessions open now; dialed counts every session
	// opened.
	conns  map[*smtp.Conn]bool
	dialed int
	// mailsPerSession, when not 0, is how many mails a session takes
	// before it answers the next MAIL FROM with 421.
	mailsPerSession int
	// dropInData is how many of the next messages the sink drops the
	// connection on while reading their DATA, without taking them.
	dropInData int
}

// Connections returns how many sessions have been opened to the sink.
func (s *Sink) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dialed
}

// OpenSessions returns how many sessions are open now.
func (s *Sink) OpenSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// CloseSessions closes every open session's connection, as a server does
// with sessions idle too long, and returns how many it closed.
func (s *Sink) CloseSessions() int {
	s.mu.Lock()
	conns := s.conns
	s.conns = map[*smtp.Conn]bool{}
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	return len(conns)
}

// LimitMailsPerSession has each session take n mails, then answer the next
// MAIL FROM with 421 (too many mails in one session), as servers with a
// per-session limit do; 0 lifts the limit.
func (s *Sink) LimitMailsPerSession(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mailsPerSession = n
}

// DropInData has the sink close the connection while it reads each of the
// next n messages' content, without taking them: a session that dies
// mid-DATA.
func (s *Sink) DropInData(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropInData = n
}

// Refused returns how many recipients the sink has refused.
func (s *Sink) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Refuse has the sink refuse every recipient with the SMTP code (451:
// try later; 550: never), until Refuse(0) has it accept again.
func (s *Sink) Refuse(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = code
}

// refusal is the error a recipient is refused with now, or nil.
func (s *Sink) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse == 0 {
		return nil
	}
	s.refused++
	return &smtp.SMTPError{Code: s.refuse, Message: "The sink refuses mail for now."}
}

// NewSink starts a sink on a loopback port; it stops when the test ends.
func NewSink(t testing.TB) *Sink {
	t.Helper()
	sink := &Sink{received: make(chan struct{}, 1), conns: map[*smtp.Conn]bool{}}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		sink.conns[c] = true
		sink.dialed++
		return &session{sink: sink, conn: c}, nil
	}))
	s.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.Addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return sink
}

// URL is the sink's address as ARBITER_SMTP_URL takes it.
func (s *Sink) URL() string { return "smtp://" + s.Addr }

// Take returns the messages received so far and forgets them. Sending is
// synchronous, so every message a call sent is here when the call returns.
func (s *Sink) Take() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.got
	s.got = nil
	return got
}

// Peek returns the messages received so far and keeps them.
func (s *Sink) Peek() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.got...)
}

// Received is signalled after a message arrives; wait on it, then Take.
func (s *Sink) Received() <-chan struct{} { return s.received }

type session struct {
	sink *Sink
	conn *smtp.Conn
	to   string
	// mails counts the mails this session took.
	mails int
}

func (s *session) Mail(string, *smtp.MailOptions) error {
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	if s.sink.mailsPerSession > 0 && s.mails >= s.sink.mailsPerSession {
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many mails in one session."}
	}
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := s.sink.refusal(); err != nil {
		return err
	}
	s.to = to
	return nil
}
func (s *session) Reset() {}
func (s *session) Logout() error {
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	delete(s.sink.conns, s.conn)
	return nil
}
func (s *session) Data(r io.Reader) error {
	s.sink.mu.Lock()
	drop := s.sink.dropInData > 0
	if drop {
		s.sink.dropInData--
	}
	s.sink.mu.Unlock()
	if drop {
		s.conn.Close()
		return errors.New("the connection was dropped")
	}
	msg, err := netmail.ReadMessage(r)
	if err != nil {
		return err
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	s.sink.mu.Lock()
	s.mails++
	s.sink.got = append(s.sink.got, Message{To: s.to, Subject: msg.Header.Get("Subject"),
		Body: string(bytes.ReplaceAll(text, []byte("\r\n"), []byte("\n")))})
	s.sink.mu.Unlock()
	select {
	case s.sink.received <- struct{}{}:
	default:
	}
	return nil
}
