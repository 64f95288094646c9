package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/mail/mailtest"
)

// waitingForAnHour makes an account, owned by owner, whose reviewers are
// mailed after 30 minutes, with one task that went to a person an hour
// ago: a digest is due to the owner.
func waitingForAnHour(t *testing.T, dbURL, owner string) {
	t.Helper()
	ctx := t.Context()
	anHourAgo := time.Now().Add(-time.Hour)
	store, err := db.Open(ctx, dbURL, db.Options{Now: func() time.Time { return anHourAgo }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	acct, err := store.FindOrCreateAccountByEmail(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	thirty := 30 * time.Minute
	if err := store.SetNotifyAfter(ctx, acct.ID, &thirty, arbiter.Actor{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8}); err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_digest", 1, 2*time.Hour)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d tasks: %v", len(claimed), err)
	}
	if err := store.FinishAgentAttempt(ctx, "wrk_digest", claimed[0].ID, arbiter.AgentStep{
		Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
	}); err != nil {
		t.Fatal(err)
	}
}

// digestTo waits for the sink's first mail and checks that it is a digest
// to the address, linking to the queue at queueURL.
func digestTo(t *testing.T, sink *mailtest.Sink, to, queueURL string, logs *testutil.SyncBuffer) {
	t.Helper()
	select {
	case <-sink.Received():
	case <-time.After(time.Minute):
		t.Fatalf("no digest was mailed:\n%s", logs.String())
	}
	got := sink.Take()
	if len(got) != 1 || got[0].To != to || !strings.HasPrefix(got[0].Subject, "1 task waiting for review") ||
		!strings.Contains(got[0].Body, queueURL+"\n") {
		t.Fatalf("mailed %+v, want one digest to %s linking to %s", got, to, queueURL)
	}
}

// TestRun_WorkerMailsDigests: `arbiter worker`, a process of its own,
// mails the reviewers' digests when it knows the reviewer site's address,
// and says at start that it sends none when it does not.
func TestRun_WorkerMailsDigests(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			dbURL := dbtest.URL(t, dialect)
			waitingForAnHour(t, dbURL, "owner@example.com")

			// Without ARBITER_REVIEW_URL, the worker says so.
			runUntilLogged(t, env(map[string]string{"ARBITER_DATABASE_URL": dbURL}),
				`msg="this worker sends no reviewer digests: ARBITER_REVIEW_URL is not set"`, "worker")

			sink := mailtest.NewSink(t)
			ctx, cancel := context.WithCancel(context.Background())
			logs := &testutil.SyncBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"worker"}, env(map[string]string{
					"ARBITER_DATABASE_URL": dbURL, "ARBITER_SMTP_URL": sink.URL(), "ARBITER_MAIL_FROM": "arbiter@example.com",
					"ARBITER_REVIEW_URL": "https://review.example.com",
				}), nil, &bytes.Buffer{}, logs)
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("worker returned %v", err)
				}
			}()
			digestTo(t, sink, "owner@example.com", "https://review.example.com/review", logs)
		})
	}
}

// TestRun_ServeDigestsLinkToTheAddressItListensOn: with no
// ARBITER_REVIEW_URL, serve's digests link to the reviewer site at the
// address it listens on, not to a bare path.
func TestRun_ServeDigestsLinkToTheAddressItListensOn(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t, db.SQLite)
	waitingForAnHour(t, dbURL, "owner@example.com")
	sink := mailtest.NewSink(t)
	base, logs := serveWithLogs(t, env(map[string]string{
		"ARBITER_DATABASE_URL": dbURL, "ARBITER_SMTP_URL": sink.URL(), "ARBITER_MAIL_FROM": "arbiter@example.com",
	}))
	digestTo(t, sink, "owner@example.com", base+"/review", logs)
}
