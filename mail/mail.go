// Package mail delivers e-mail sign-in links: through an SMTP server when
// one is configured, or else to the server log, so a development server
// works without a mail server.
package mail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"

	"github.com/arbiterhq/arbiter"
)

// Mailer sends every mail Arbiter sends: sign-in links and invitations
// (arbiter.LoginMailer and more), and the mail outbox's reminders, rungs,
// digests, drift mails and notices of disabled webhook endpoints
// (arbiter.MailSender).
type Mailer interface {
	arbiter.LoginMailer
	arbiter.MailSender
	// Close ends the sessions kept open to the mail server.
	io.Closer
}

// New returns the SMTP mailer of rawURL, or the log mailer when rawURL is "":
// it logs through logger, and writes each link on a line of its own to out,
// the log's stream.
func New(rawURL, from string, logger *slog.Logger, out io.Writer) (Mailer, error) {
	if rawURL == "" {
		return &Log{Logger: logger, Out: out}, nil
	}
	return NewSMTP(rawURL, from)
}

// Log writes each sign-in link to the server log. It is the one place a
// secret is logged on purpose: without SMTP, the log is how the link reaches
// the person, so use it only where the log is private.
type Log struct {
	// Logger gets one line with the address and the full link.
	Logger *slog.Logger
	// Out, when set, gets the link once more on a line of its own, easy to
	// copy: the stream Logger writes to.
	Out io.Writer
}

var _ arbiter.LoginLinkLogger = (*Log)(nil)

// SendLoginLink logs the address and the full link, then writes the link
// alone on the next line of Out.
func (l *Log) SendLoginLink(ctx context.Context, to, link string) error {
	return l.logLink(ctx, "sign-in link", to, link)
}

// SendInvitation logs an invitation's link as SendLoginLink logs a sign-in
// link, under its own name, with the account and role it invites to.
func (l *Log) SendInvitation(ctx context.Context, to, accountName, role, link string) error {
	return l.logLink(ctx, "invitation link", to, link, "account", accountName, "role", role)
}

// logLink logs a link of the kind named, then writes it alone on the next
// line of Out.
func (l *Log) logLink(ctx context.Context, kind, to, link string, attrs ...any) error {
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.InfoContext(ctx, kind+" (no ARBITER_SMTP_URL set, so it is logged instead of mailed; open the next line)",
		append([]any{"to", to}, append(attrs, "url", link)...)...)
	if l.Out != nil {
		if _, err := fmt.Fprintln(l.Out, link); err != nil {
			return fmt.Errorf("write the %s: %w", kind, err)
		}
	}
	return nil
}

// Send logs that a message would have been mailed, without its body.
func (l *Log) Send(ctx context.Context, to, subject, _ string) error {
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.InfoContext(ctx, "mail not sent (no ARBITER_SMTP_URL set)", "to", to, "subject", subject)
	return nil
}

// Close does nothing: the log mailer holds no session.
func (l *Log) Close() error { return nil }

// LinksGoToLog reports true: the log mailer mails nothing.
func (l *Log) LinksGoToLog() bool { return true }

// SMTP sends mail through an SMTP server over a few sessions it keeps open:
// each mail takes an idle session (or dials one, with STARTTLS and the login
// as configured), sends MAIL, RCPT and DATA on it, resets it with RSET and
// gives it back. Close ends the sessions.
type SMTP struct {
	host     string
	port     int
	ssl      bool
	user     string
	password string
	from     string

	// client holds the settings every session is dialed with.
	client *gomail.Client
	// slots holds a token per session open or being dialed: at most
	// SMTPSessions.
	slots chan struct{}
	mu    sync.Mutex
	// idle are the open sessions no mail uses, the most recently used
	// last.
	idle   []smtpSession
	closed bool
	// now is the clock of the idle times (time.Now).
	now func() time.Time
}

// SMTPSessions bounds the sessions an SMTP mailer keeps open at once: a mail
// sent while all are busy waits for one. It is the mail deliverer's
// concurrency and a few more for sign-in links and invitations.
const SMTPSessions = 8

// SMTPSessionIdle is how long a session may stay idle before it is closed
// rather than used again: shorter than the five minutes RFC 5321 lets a
// server wait, so that a session is seldom closed by the server unseen.
const SMTPSessionIdle = 30 * time.Second

// smtpTimeout bounds each dial and each command of a session.
const smtpTimeout = 30 * time.Second

// smtpSession is an open SMTP connection and when its last mail ended.
type smtpSession struct {
	conn      *gosmtp.Client
	idleSince time.Time
}

// NewSMTP returns a mailer for smtp://[user:password@]host[:port] (STARTTLS
// when the server offers it, port 587 by default) or
// smtps://[user:password@]host[:port] (TLS from the start, port 465), sending
// from the address from.
func NewSMTP(rawURL, from string) (*SMTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
		return nil, fmt.Errorf("ARBITER_SMTP_URL must look like smtp://user:password@host:587 or smtps://…:465")
	}
	if _, err := arbiter.NormalizeEmail(from); err != nil {
		return nil, fmt.Errorf("ARBITER_MAIL_FROM must be an e-mail address such as arbiter@example.com when ARBITER_SMTP_URL is set, not %q", from)
	}
	s := &SMTP{host: u.Hostname(), ssl: u.Scheme == "smtps", from: from, port: 587,
		slots: make(chan struct{}, SMTPSessions), now: time.Now}
	if s.ssl {
		s.port = 465
	}
	if p := u.Port(); p != "" {
		if s.port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("ARBITER_SMTP_URL has a bad port %q", p)
		}
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.password, _ = u.User.Password()
	}
	// No NOOP before each mail: a session the server ended fails at MAIL
	// FROM, before anything was accepted, and is dialed again then.
	opts := []gomail.Option{gomail.WithPort(s.port), gomail.WithTimeout(smtpTimeout), gomail.WithoutNoop()}
	if s.ssl {
		opts = append(opts, gomail.WithSSL())
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if s.user != "" {
		// PLAIN refuses to send the password over an unencrypted
		// connection to anything but localhost.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain),
			gomail.WithUsername(s.user), gomail.WithPassword(s.password))
	}
	if s.client, err = gomail.NewClient(s.host, opts...); err != nil {
		return nil, fmt.Errorf("smtp client: %w", err)
	}
	return s, nil
}

// SendLoginLink sends the link to the address as a plain-text message.
func (s *SMTP) SendLoginLink(ctx context.Context, to, link string) error {
	if err := s.send(ctx, to, "Your Arbiter sign-in link", loginBody(link)); err != nil {
		return fmt.Errorf("send sign-in mail: %w", err)
	}
	return nil
}

// SendInvitation sends an invitation's link to the address.
func (s *SMTP) SendInvitation(ctx context.Context, to, accountName, role, link string) error {
	if err := s.send(ctx, to, "You are invited to review on Arbiter", invitationBody(accountName, role, link)); err != nil {
		return fmt.Errorf("send invitation mail: %w", err)
	}
	return nil
}

// Send sends a plain-text message to the address: the worker's digests go
// this way too.
func (s *SMTP) Send(ctx context.Context, to, subject, body string) error {
	return s.send(ctx, to, subject, body)
}

// send delivers one plain-text message over a session kept open. When the
// server ended a session that was kept open (a 421, or a closed
// connection) before it took the mail, the mail is sent once more on a
// fresh session. A mail the server accepted is sent: a failure after it
// (the RSET) only ends the session. A session that failed during DATA,
// where the server may or may not have taken the mail, is closed and the
// error returned, for the caller to try later, as with any other failure.
func (s *SMTP) send(ctx context.Context, to, subject, body string) error {
	m := gomail.NewMsg()
	if err := m.From(s.from); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	if err := m.To(to); err != nil {
		return fmt.Errorf("mail to: %w: %w", errBadAddress, err)
	}
	m.Subject(subject)
	m.SetBodyString(gomail.TypeTextPlain, body)

	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("via %s:%d: no session free: %w", s.host, s.port, ctx.Err())
	}
	defer func() { <-s.slots }()
	session, reused, err := s.take(ctx)
	if err != nil {
		return fmt.Errorf("via %s:%d: dial failed: %w", s.host, s.port, err)
	}
	err = s.client.SendWithSMTPClient(session.conn, m)
	if err != nil && reused && !m.IsDelivered() && sessionEnded(err) {
		session.conn.Close()
		if session.conn, err = s.dial(ctx); err != nil {
			return fmt.Errorf("via %s:%d: dial failed: %w", s.host, s.port, err)
		}
		err = s.client.SendWithSMTPClient(session.conn, m)
	}
	if m.IsDelivered() {
		if err != nil {
			// The server took the mail; only the RSET after it failed.
			session.conn.Close()
		} else {
			s.giveBack(session)
		}
		return nil
	}
	session.conn.Close()
	return fmt.Errorf("via %s:%d: %w", s.host, s.port, err)
}

// take returns the most recently used idle session, closing those idle
// too long, or else dials a new one; reused says whether it was open.
func (s *SMTP) take(ctx context.Context) (session smtpSession, reused bool, err error) {
	s.mu.Lock()
	var stale []smtpSession
	for len(s.idle) > 0 {
		last := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if s.now().Sub(last.idleSince) < SMTPSessionIdle {
			session, reused = last, true
			break
		}
		stale = append(stale, last)
	}
	s.mu.Unlock()
	for _, old := range stale {
		old.conn.Close()
	}
	if reused {
		return session, true, nil
	}
	session.conn, err = s.dial(ctx)
	return session, false, err
}

// dial opens a session: EHLO, STARTTLS when offered (or TLS from the
// start), and the login when the URL has one.
func (s *SMTP) dial(ctx context.Context) (*gosmtp.Client, error) {
	return s.client.DialToSMTPClientWithContext(ctx)
}

// giveBack keeps a session for the next mail, or closes it when the
// mailer is closed.
func (s *SMTP) giveBack(session smtpSession) {
	session.idleSince = s.now()
	s.mu.Lock()
	if !s.closed {
		s.idle = append(s.idle, session)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	session.conn.Close()
}

// Close ends the idle sessions with QUIT, each bounded by a second, and
// has the mails still in flight close theirs when they end.
func (s *SMTP) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, session := range idle {
		if session.conn.UpdateDeadline(time.Second) != nil || session.conn.Quit() != nil {
			session.conn.Close()
		}
	}
	return nil
}

// sessionEnded reports whether a send failed because the server ended the
// session before the mail's content was sent — a 421 (the server closes
// the session: an idle timeout, a limit of mails per session) or a
// connection that is gone — so that the mail is safe to send again on a
// fresh session.
func sessionEnded(err error) bool {
	var send *gomail.SendError
	if !errors.As(err, &send) {
		return false
	}
	switch send.Reason {
	case gomail.ErrConnCheck, gomail.ErrSMTPMailFrom, gomail.ErrSMTPRcptTo, gomail.ErrSMTPData:
		return send.ErrorCode() == 421 || send.ErrorCode() == 0
	}
	return false
}

// errBadAddress marks a recipient the message cannot carry.
var errBadAddress = errors.New("not an address a mail can go to")

// Permanent reports whether a send failed in a way no retry mends: an
// address a message cannot carry, or a recipient the SMTP server refuses
// for good (5xx to RCPT TO). A server that is down, that says to try later
// (4xx), or that refuses the sender or the login (a setting to mend, after
// which the mail should go) is worth trying again.
func Permanent(err error) bool {
	if errors.Is(err, errBadAddress) {
		return true
	}
	var send *gomail.SendError
	return errors.As(err, &send) && send.Reason == gomail.ErrSMTPRcptTo && !send.IsTemp() && send.ErrorCode() >= 500
}

// invitationBody is the text of an invitation mail.
func invitationBody(accountName, role, link string) string {
	return strings.Join([]string{
		"Hello,",
		"",
		fmt.Sprintf("You are invited to join %s on Arbiter as %s.", accountName, strings.ToLower(arbiter.RoleLabel(role))),
		"Open this link, then sign in with this address (an e-mail link, or a provider that has verified it):",
		"",
		link,
		"",
		fmt.Sprintf("It works once, within %d days. If you do not know the sender, ignore this mail.", int(arbiter.InvitationTTL.Hours()/24)),
		"",
		"— Arbiter",
	}, "\r\n")
}

// loginBody is the text of a sign-in mail.
func loginBody(link string) string {
	return strings.Join([]string{
		"Hello,",
		"",
		"Open this link to sign in to Arbiter:",
		"",
		link,
		"",
		fmt.Sprintf("It works once, within %d minutes. If you did not ask to sign in, ignore this mail: nobody can sign in without the link.", int(arbiter.LoginTokenTTL.Minutes())),
		"",
		"— Arbiter",
	}, "\r\n")
}
