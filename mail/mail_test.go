package mail

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

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
