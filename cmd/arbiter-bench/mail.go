package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// The mail phase (issue 50): the mail outbox's deliveries per second to an
// SMTP server in this process (go-smtp, as the project's tests use),
// sent by `arbiter worker`'s mail deliverer as it runs in production.

// mailTarget is the phase's target, in mails a second.
const mailTarget = 1000

// smtpSink is an SMTP server that accepts every message, counts it and
// notes when the first and the last arrived.
type smtpSink struct {
	srv      *smtp.Server
	addr     string
	received atomic.Int64
	mu       sync.Mutex
	first    time.Time
	last     time.Time
}

func startSMTPSink() (*smtpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &smtpSink{addr: ln.Addr().String()}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{sink: s}, nil }))
	s.srv.Domain = "localhost"
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// sinkSession is one SMTP connection to the sink.
type sinkSession struct{ sink *smtpSink }

func (s *sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *sinkSession) Reset()                               {}
func (s *sinkSession) Logout() error                        { return nil }

// Data reads the message and counts it.
func (s *sinkSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	now := time.Now()
	s.sink.mu.Lock()
	if s.sink.first.IsZero() {
		s.sink.first = now
	}
	s.sink.last = now
	s.sink.mu.Unlock()
	s.sink.received.Add(1)
	return nil
}

// measureMail queues b.mailMessages reminder mails through the outbox (as
// many tasks waiting for a person with a reminder due, fired by the
// reminders sweep) and times `arbiter worker` sending them all to the
// sink: mails per second from the first arrival to the last.
func (b *bench) measureMail(ctx context.Context) error {
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	sink, err := startSMTPSink()
	if err != nil {
		return err
	}
	defer sink.srv.Close()
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000, QuotingMailsPerDay: 100_000_000})
	if err != nil {
		return err
	}
	defer store.Close()
	account, err := store.FindOrCreateAccountByEmail(ctx, "bench-mail@example.com")
	if err != nil {
		return err
	}
	b.logf("queueing %d reminder mails", b.mailMessages)
	ids, err := createPending(ctx, store, account.ID, b.mailMessages)
	if err != nil {
		return err
	}
	conn, err := sql.Open("postgres", b.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := remindNow(ctx, conn, ids); err != nil {
		return err
	}
	if _, _, err := sweepOnce(ctx, store, sweeps[1]); err != nil {
		return fmt.Errorf("fire reminders: %w", err)
	}
	var queued int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM mail_messages WHERE status = 'pending'").Scan(&queued); err != nil {
		return err
	}
	if queued != b.mailMessages {
		return fmt.Errorf("the reminders queued %d mails, not %d", queued, b.mailMessages)
	}
	dir, err := os.MkdirTemp("", "arbiter-bench-mail")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logFile, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	b.logf("arbiter worker sending them to an SMTP server on loopback")
	cmd := exec.Command(b.bin, "worker")
	cmd.Env = b.env("ARBITER_SMTP_URL=smtp://"+sink.addr, "ARBITER_REVIEW_URL=http://127.0.0.1:1",
		"ARBITER_MAIL_FROM=bench@example.com")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	b.serverPID = cmd.Process.Pid
	before := b.cpuNow()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	start := time.Now()
	if err := awaitCount(ctx, start, "mails sent", sink.received.Load, b.mailMessages, logFile.Name()); err != nil {
		return err
	}
	sink.mu.Lock()
	elapsed := sink.last.Sub(sink.first)
	sink.mu.Unlock()
	b.results = append(b.results, result{
		name: "mail deliveries", ops: int64(b.mailMessages), elapsed: elapsed,
		perSec: float64(b.mailMessages-1) / elapsed.Seconds(), unitName: "mails/s",
		cpu: b.cpuNow().minus(before),
	})
	return nil
}

// remindNow has the tasks wait for a person, for an hour, with a reminder
// after 15 minutes, due a second ago by the database's clock.
func remindNow(ctx context.Context, conn *sql.DB, ids []string) error {
	reminder, err := json.Marshal(arbiter.Alerts{Reminders: []arbiter.AlertWait{{After: 15 * time.Minute}}})
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `UPDATE task_states SET status = 'human_needed', alerts = $2,
		created_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 3600000,
		alert_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1000
		WHERE id = ANY($1)`, pq.Array(ids), string(reminder))
	return err
}

// printMailTargets writes the mail phase against its target.
func printMailTargets(w io.Writer, byName map[string]result) {
	if r, ok := byName["mail deliveries"]; ok {
		fmt.Fprintf(w, "%-22s %.0f mails/s (target ≥ %d) %s\n", "mail deliveries", r.perSec, mailTarget, verdict(r.perSec >= mailTarget))
	}
}
