package mail

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestLog_WritesTheLinkOnOneLine(t *testing.T) {
	var buf bytes.Buffer
	m, err := New("", "", slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	link := "http://localhost:8080/signin/email/confirm?token=abc"
	if err := m.SendLoginLink(context.Background(), "a@example.com", link); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `url="`+link+`"`) || !strings.Contains(out, "to=a@example.com") {
		t.Fatalf("log = %q, want one line with the address and the full link", out)
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
