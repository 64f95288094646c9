package mail

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/mail/mailtest"
)

func TestLog_WritesTheLinkOnALineOfItsOwn(t *testing.T) {
	var buf bytes.Buffer
	m, err := New("", "", slog.New(slog.NewTextHandler(&buf, nil)), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !arbiter.LoginLinksGoToLog(m) {
		t.Error("the log mailer does not say that links go to the log")
	}
	link := "http://localhost:8080/signin/email/confirm?token=abc"
	if err := m.SendLoginLink(context.Background(), "a@example.com", link); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("log = %q, want the log line and the link's own line", buf.String())
	}
	// One log line with the address and the full link, for log readers;
	if !strings.Contains(lines[0], `url="`+link+`"`) || !strings.Contains(lines[0], "to=a@example.com") {
		t.Errorf("log line = %q, want the address and the full link", lines[0])
	}
	// then the link alone, to copy.
	if lines[1] != link {
		t.Errorf("the link's own line = %q, want %q", lines[1], link)
	}
}

func TestSMTP_MailsLinks(t *testing.T) {
	s, err := NewSMTP("smtp://mail.example.com", "a@example.com")
	if err != nil || arbiter.LoginLinksGoToLog(s) {
		t.Errorf("the SMTP mailer (%v) says links go to the log", err)
	}
}

func TestNewSMTP(t *testing.T) {
	for _, tc := range []struct {
		url, from string
		host      string
		port      int
		ssl       bool
		user      string
	}{
		{"smtp://mail.example.com", "a@example.com", "mail.example.com", 587, false, ""},
		{"smtps://u:p%40ss@mail.example.com", "a@example.com", "mail.example.com", 465, true, "u"},
		{"smtp://u:p@127.0.0.1:2525", "a@example.com", "127.0.0.1", 2525, false, "u"},
	} {
		s, err := NewSMTP(tc.url, tc.from)
		if err != nil || s.host != tc.host || s.port != tc.port || s.ssl != tc.ssl || s.user != tc.user {
			t.Errorf("NewSMTP(%q) = %+v, %v", tc.url, s, err)
		}
	}
	s, _ := NewSMTP("smtps://u:p%40ss@mail.example.com", "a@example.com")
	if s.password != "p@ss" {
		t.Errorf("password = %q, want the URL-decoded p@ss", s.password)
	}
	for _, bad := range [][2]string{
		{"http://mail.example.com", "a@example.com"},
		{"smtp://", "a@example.com"},
		{"smtp://mail.example.com:x", "a@example.com"},
		{"smtp://mail.example.com", ""},
	} {
		if _, err := NewSMTP(bad[0], bad[1]); err == nil {
			t.Errorf("NewSMTP(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}

// TestLog_LabelsAnInvitationAsOne: without SMTP, an invitation's link is
// logged as an invitation link, with the account and role, not as a
// sign-in link.
func TestLog_LabelsAnInvitationAsOne(t *testing.T) {
	var buf bytes.Buffer
	m, err := New("", "", slog.New(slog.NewTextHandler(&buf, nil)), &buf)
	if err != nil {
		t.Fatal(err)
	}
	link := "http://localhost:8080/invitations/accept?token=abc"
	if err := arbiter.InvitationMailerOf(m).SendInvitation(context.Background(), "b@example.com", "a@example.com", "reviewer", link); err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(buf.String(), "\n", 2)[0]
	if !strings.Contains(line, `msg="invitation link (`) || strings.Contains(line, "sign-in") ||
		!strings.Contains(line, "account=a@example.com") || !strings.Contains(line, "role=reviewer") || !strings.Contains(line, `url="`+link+`"`) {
		t.Errorf("log line = %q", line)
	}
}

// TestPermanent: only a recipient refused for good, or an address no mail
// can carry, is permanent; a server that says to try later, or that is
// not there, is worth trying again.
func TestPermanent(t *testing.T) {
	sink := mailtest.NewSink(t)
	s, err := NewSMTP(sink.URL(), "arbiter@example.com")
	if err != nil {
		t.Fatal(err)
	}
	send := func(to string) error { return s.Send(t.Context(), to, "Subject", "Body") }
	for _, tc := range []struct {
		name      string
		refuse    int
		to        string
		permanent bool
	}{
		{"refused for good", 550, "lead@example.com", true},
		{"told to try later", 451, "lead@example.com", false},
		{"not an address", 0, "not an address", true},
	} {
		sink.Refuse(tc.refuse)
		err := send(tc.to)
		if err == nil || Permanent(err) != tc.permanent {
			t.Errorf("%s: %v, permanent %v, want %v", tc.name, err, Permanent(err), tc.permanent)
		}
	}
	sink.Refuse(0)
	if err := send("lead@example.com"); err != nil || len(sink.Take()) != 1 {
		t.Fatalf("accepted: %v", err)
	}
	down, err := NewSMTP("smtp://127.0.0.1:1", "arbiter@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Send(t.Context(), "lead@example.com", "Subject", "Body"); err == nil || Permanent(err) {
		t.Errorf("a server that is down: %v, permanent %v", err, Permanent(err))
	}
}

// newSinkMailer returns an SMTP mailer to a new sink, closed when the test
// ends.
func newSinkMailer(t *testing.T) (*SMTP, *mailtest.Sink) {
	t.Helper()
	sink := mailtest.NewSink(t)
	s, err := NewSMTP(sink.URL(), "arbiter@example.com")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, sink
}

// sendNumbered sends the mails numbered from..to-1, each its number as
// subject, and fails the test on the first error.
func sendNumbered(t *testing.T, s *SMTP, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Send(t.Context(), "lead@example.com", fmt.Sprint(i), "Body"); err != nil {
			t.Fatalf("mail %d: %v", i, err)
		}
	}
}

// subjects returns the subjects of the messages the sink took since the
// last call, in order.
func subjects(sink *mailtest.Sink) []string {
	var got []string
	for _, m := range sink.Take() {
		got = append(got, m.Subject)
	}
	return got
}

// awaitOpenSessions waits until the sink has n sessions open.
func awaitOpenSessions(t *testing.T, sink *mailtest.Sink, n int) {
	t.Helper()
	for sink.OpenSessions() != n {
		select {
		case <-t.Context().Done():
			t.Fatalf("%d sessions open, want %d", sink.OpenSessions(), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestSMTP_SendsSeveralMailsOverOneSession: mails sent one after another
// share one session, reset with RSET between them, rather than a session
// each.
func TestSMTP_SendsSeveralMailsOverOneSession(t *testing.T) {
	s, sink := newSinkMailer(t)
	sendNumbered(t, s, 0, 5)
	if got := subjects(sink); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Errorf("received %q", got)
	}
	if n := sink.Connections(); n != 1 {
		t.Errorf("%d sessions for five mails, want 1", n)
	}
}

// TestSMTP_RedialsASessionTheServerClosed: a session the server closed
// between two mails is dialed again and the next mail sent once.
func TestSMTP_RedialsASessionTheServerClosed(t *testing.T) {
	s, sink := newSinkMailer(t)
	sendNumbered(t, s, 0, 1)
	if n := sink.CloseSessions(); n != 1 {
		t.Fatalf("closed %d sessions, want the one kept open", n)
	}
	sendNumbered(t, s, 1, 3)
	if got := subjects(sink); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("received %q, want each mail once", got)
	}
	if n := sink.Connections(); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
}

// TestSMTP_RedialsAfter421: a server that takes two mails a session and
// answers the third MAIL FROM with 421 gets every mail once, over fresh
// sessions.
func TestSMTP_RedialsAfter421(t *testing.T) {
	s, sink := newSinkMailer(t)
	sink.LimitMailsPerSession(2)
	sendNumbered(t, s, 0, 5)
	if got := subjects(sink); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Errorf("received %q, want each mail once", got)
	}
	if n := sink.Connections(); n != 3 {
		t.Errorf("%d sessions for five mails at two a session, want 3", n)
	}
}

// TestSMTP_ASessionDeadInDataFailsTheMail: a session that dies while the
// mail's content is sent fails the send (the caller tries it again later:
// the server may or may not have it, so the mailer does not send it again
// itself), and the next mail goes over a fresh session.
func TestSMTP_ASessionDeadInDataFailsTheMail(t *testing.T) {
	s, sink := newSinkMailer(t)
	sendNumbered(t, s, 0, 1)
	sink.DropInData(1)
	err := s.Send(t.Context(), "lead@example.com", "dropped", "Body")
	if err == nil || Permanent(err) {
		t.Fatalf("a mail dropped in DATA: %v, permanent %v; want an error worth a retry", err, Permanent(err))
	}
	sendNumbered(t, s, 1, 2)
	if got := subjects(sink); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("received %q, want the dropped mail not sent again", got)
	}
	if n := sink.Connections(); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
}

// TestSMTP_BoundsItsSessions: many mails at once share at most
// SMTPSessions sessions, and each arrives once.
func TestSMTP_BoundsItsSessions(t *testing.T) {
	s, sink := newSinkMailer(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4*SMTPSessions)
	for i := range 4 * SMTPSessions {
		wg.Go(func() { errs <- s.Send(t.Context(), "lead@example.com", fmt.Sprint(i), "Body") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := subjects(sink)
	slices.Sort(got)
	if len(got) != 4*SMTPSessions || len(slices.Compact(got)) != 4*SMTPSessions {
		t.Errorf("received %d mails (%q), want %d, each once", len(got), got, 4*SMTPSessions)
	}
	if n := sink.Connections(); n > SMTPSessions {
		t.Errorf("%d sessions, want at most %d", n, SMTPSessions)
	}
}

// TestSMTP_ClosesSessionsIdleTooLong: a session idle SMTPSessionIdle is
// closed, not used, and the mail goes over a fresh one; Close ends the
// sessions kept open.
func TestSMTP_ClosesSessionsIdleTooLong(t *testing.T) {
	s, sink := newSinkMailer(t)
	now := time.Now()
	s.now = func() time.Time { return now }
	sendNumbered(t, s, 0, 1)
	now = now.Add(SMTPSessionIdle)
	sendNumbered(t, s, 1, 2)
	if n := sink.Connections(); n != 2 {
		t.Errorf("%d sessions, want the idle one replaced", n)
	}
	awaitOpenSessions(t, sink, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	awaitOpenSessions(t, sink, 0)
	if got := subjects(sink); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("received %q", got)
	}
}
