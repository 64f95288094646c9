package db_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// refusedDial returns the error of a dial to a loopback port nobody
// listens on.
func refusedDial(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Skip("the closed port was taken again")
	}
	return err
}

// TestStore_ConnectionErrorsAreUnavailable reads the errors of a lost
// connection to Postgres as unavailable, with a Retry-After, like a
// timeout, and leaves the store's other errors as they are.
func TestStore_ConnectionErrorsAreUnavailable(t *testing.T) {
	// Not parallel: its store times out after 3 s, which a machine busy with
	// other tests could spend on the steps meant to pass.
	d := dbtest.Open(t, db.SQLite, db.Options{Timeout: 3 * time.Second})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", fmt.Errorf("insert tasks: %w", refusedDial(t)), arbiter.EUNAVAILABLE},
		{"bad connection", fmt.Errorf("insert tasks: %w", driver.ErrBadConn), arbiter.EUNAVAILABLE},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, arbiter.EUNAVAILABLE},
		{"dropped", fmt.Errorf("find task: %w", io.ErrUnexpectedEOF), arbiter.EUNAVAILABLE},
		{"closed", fmt.Errorf("find task: %w", io.EOF), arbiter.EUNAVAILABLE},
		{"shutting down", &pq.Error{Code: "57P01"}, arbiter.EUNAVAILABLE},
		{"starting up", &pq.Error{Code: "57P03"}, arbiter.EUNAVAILABLE},
		{"connection failure", &pq.Error{Code: "08006"}, arbiter.EUNAVAILABLE},
		{"too many connections", &pq.Error{Code: "53300"}, arbiter.EUNAVAILABLE},
		{"timed out", fmt.Errorf("find task: %w", context.DeadlineExceeded), arbiter.EUNAVAILABLE},
		{"a replica's conflict with recovery", &pq.Error{Code: "40001", Message: "canceling statement due to conflict with recovery"}, arbiter.EUNAVAILABLE},
		{"serialization failure", &pq.Error{Code: "40001", Message: "could not serialize access due to concurrent update"}, arbiter.EINTERNAL},
		{"unique violation", &pq.Error{Code: "23505"}, arbiter.EINTERNAL},
		{"no rows", sql.ErrNoRows, arbiter.EINTERNAL},
		{"other", errors.New("disk full"), arbiter.EINTERNAL},
		{"not found", fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.ENOTFOUND, "Task not found."), io.EOF), arbiter.ENOTFOUND},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := d.Unavailable(tc.err)
			wantCode(t, err, tc.want)
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not keep the cause %v", err, tc.err)
			}
			var e *arbiter.Error
			if tc.want == arbiter.EUNAVAILABLE && (!errors.As(err, &e) || e.RetryAfter != 3*time.Second) {
				t.Errorf("error = %#v, want a Retry-After of the store's timeout", e)
			}
		})
	}
}

// TestStore_PostgresGone resets every connection to Postgres and refuses
// new ones, as a stopped or restarting server does: creates and reads fail
// as unavailable, with a Retry-After, and work again once it is back.
func TestStore_PostgresGone(t *testing.T) {
	// Not parallel: its store times out after 5 s, which a machine busy with
	// other tests could spend on the steps meant to pass.
	proxy, url := dbtest.ThroughProxy(t, dbtest.URL(t, db.Postgres))
	d := dbtest.OpenURL(t, url, db.Options{Timeout: 5 * time.Second})
	acct := newAccount(t, d, "a@example.com")
	task, err := d.CreateTask(ctx, acct.ID, taskCreate("before"))
	if err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"CreateTask", func() error { _, err := d.CreateTask(ctx, acct.ID, taskCreate("gone")); return err }},
		{"CreateTasks", func() error {
			_, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{taskCreate("gone"), taskCreate("gone")})
			return err
		}},
		{"FindTaskByID", func() error { _, err := d.FindTaskByID(ctx, acct.ID, task.ID); return err }},
		{"ClaimTasks", func() error { _, err := d.ClaimTasks(ctx, "w", 1, time.Minute); return err }},
	} {
		t.Run(call.name, func(t *testing.T) {
			err := within(t, call.do)
			wantCode(t, err, arbiter.EUNAVAILABLE)
			var e *arbiter.Error
			if !errors.As(err, &e) || e.RetryAfter <= 0 {
				t.Errorf("error = %#v, want a Retry-After", e)
			}
		})
	}

	proxy.Restore()
	recovered := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !recovered; {
		_, err := d.CreateTask(ctx, acct.ID, taskCreate("after"))
		recovered = err == nil
	}
	if !recovered {
		t.Fatal("creates did not work again once Postgres was back")
	}
}

// TestWebhookDelivery_ARecordPostgresLostIsUnavailable: the record of a
// delivery made while the connection to Postgres is lost fails as
// unavailable, alone or in a group, so that the deliverer sends it again
// rather than give up a delivery the receiver has; it used to fail as an
// internal error when the group was recorded one by one.
func TestWebhookDelivery_ARecordPostgresLostIsUnavailable(t *testing.T) {
	// Not parallel: its store times out after 5 s, which a machine busy with
	// other tests could spend on the steps meant to pass.
	proxy, url := dbtest.ThroughProxy(t, dbtest.URL(t, db.Postgres))
	d := dbtest.OpenURL(t, url, db.Options{Timeout: 5 * time.Second})
	acct := newAccount(t, d, "a@example.com")
	e := newWebhookEndpoint(t, d, acct.ID)
	var records []arbiter.WebhookRecord
	for range 2 {
		m, err := d.SendWebhookPing(ctx, acct.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, arbiter.WebhookRecord{MessageID: m.ID, Step: arbiter.WebhookStep{Status: arbiter.WebhookDelivered,
			Attempt: arbiter.WebhookAttempt{StatusCode: 200, AttemptedAt: arbiter.TimestampOf(time.Now())}}})
	}
	if claimed, err := d.ClaimWebhookMessages(ctx, "whd", 10, time.Minute); err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}

	proxy.Cut()
	for _, group := range [][]arbiter.WebhookRecord{records[:1], records} {
		t.Run(fmt.Sprint(len(group)), func(t *testing.T) {
			var out []arbiter.WebhookRecorded
			err := within(t, func() (err error) {
				out, err = d.RecordWebhookAttempts(ctx, "whd", group)
				return err
			})
			if err != nil {
				wantCode(t, err, arbiter.EUNAVAILABLE)
				return
			}
			if len(out) != len(group) {
				t.Fatalf("%d outcomes of %d records", len(out), len(group))
			}
			for i := range out {
				wantCode(t, out[i].Err, arbiter.EUNAVAILABLE)
			}
		})
	}
}
