package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/web"
	"github.com/arbiterhq/arbiter/worker"
)

// The Slack phases (issue 31), in this process against the bench's
// Postgres and a fake Slack: how fast a click is acknowledged at a
// steady rate of clicks (the target: p99 under 100 ms at 200 clicks/s,
// every click deciding its task), and the fan-out of questions to
// several channels (each channel paced, no message lost).

const (
	slackClickRate   = 200
	slackSecret      = "0123456789abcdef0123456789abcdef"
	slackChannels    = 5
	slackPerChannel  = 10
	slackAckTargetMS = 100
)

// fakeSlack answers the Web API calls the phases make and notes the
// posts per channel.
type fakeSlack struct {
	srv   *httptest.Server
	mu    sync.Mutex
	posts map[string][]time.Time
	seq   int
}

func startFakeSlack() *fakeSlack {
	f := &fakeSlack{posts: map[string][]time.Time{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		w.Header().Set("Content-Type", "application/json")
		switch strings.TrimPrefix(r.URL.Path, "/api/") {
		case "users.info":
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": map[string]any{"id": form.Get("user"),
				"is_email_confirmed": true, "profile": map[string]any{"email": "bench-slack@example.com"}}})
		case "chat.postMessage":
			f.mu.Lock()
			f.seq++
			ch := form.Get("channel")
			f.posts[ch] = append(f.posts[ch], time.Now())
			ts := fmt.Sprintf("1700000000.%06d", f.seq)
			f.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": ch, "ts": ts})
		default:
			json.NewEncoder(w).Encode(map[string]any{"ok": true})
		}
	}))
	return f
}

// openSealedStore empties the bench database and opens a store on it
// with a fresh secrets key, as the chat outboxes' phases need: their
// connections' tokens are sealed.
func (b *bench) openSealedStore(ctx context.Context) (*db.DB, error) {
	if err := b.resetDatabase(ctx); err != nil {
		return nil, err
	}
	key, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		return nil, err
	}
	return db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000, Secrets: key})
}

func (b *bench) measureSlack(ctx context.Context) error {
	store, err := b.openSealedStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	fake := startFakeSlack()
	defer fake.srv.Close()
	client := slack.NewClient(fake.srv.URL+"/api/", nil)
	if err := b.measureSlackAcks(ctx, store, client, fake); err != nil {
		return err
	}
	return b.measureSlackFanOut(ctx, store, client, fake)
}

// slackAccount connects a new account to the fake Slack on channel and
// returns it with n tasks waiting for a person.
func slackAccount(ctx context.Context, store *db.DB, email, channel string, n int) (string, []string, error) {
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		return "", nil, err
	}
	if _, err := store.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-bench",
		SigningSecret: slackSecret, DefaultChannel: channel}, "TBENCH", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		return "", nil, err
	}
	ids, err := waitingTasks(ctx, store, acct.ID, n)
	return acct.ID, ids, err
}

// waitingTasks creates n tasks for the account and hands each to a person,
// as the agent tier would, and returns their ids.
func waitingTasks(ctx context.Context, store *db.DB, accountID string, n int) ([]string, error) {
	ids := make([]string, 0, n)
	for range n {
		t, err := store.CreateTask(ctx, accountID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "bench"})
		if err != nil {
			return nil, err
		}
		ids = append(ids, t.ID)
	}
	const owner = "wrk_bench_waiting"
	for {
		claimed, err := store.ClaimTasks(ctx, owner, 500, time.Minute)
		if err != nil {
			return nil, err
		}
		if len(claimed) == 0 {
			return ids, nil
		}
		for _, t := range claimed {
			if err := store.FinishAgentAttempt(ctx, owner, t.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent},
				Next: arbiter.StatusHumanNeeded}); err != nil {
				return nil, err
			}
		}
	}
}

// measureSlackAcks clicks a verdict on a different task every 1/200 s
// for the phase's duration, as Slack would post it (signed), and notes
// how long each ack took; then checks that every click decided its task.
func (b *bench) measureSlackAcks(ctx context.Context, store *db.DB, client *slack.Client, fake *fakeSlack) error {
	n := int(b.duration.Seconds() * slackClickRate)
	b.logf("slack: %d tasks to click at %d clicks/s", n, slackClickRate)
	accountID, ids, err := slackAccount(ctx, store, "bench-slack@example.com", "#bench-acks", n)
	if err != nil {
		return err
	}
	// The clicking Slack user is linked to the account's owner, as the
	// owner's visit to the link page would.
	owner, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail,
		Subject: "bench-slack@example.com", Email: "bench-slack@example.com", EmailVerified: true})
	if err != nil {
		return err
	}
	token, err := store.OfferChatLink(ctx, accountID, arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: "TBENCH",
		UserID: "UBENCH", Email: owner.Email})
	if err != nil {
		return err
	}
	if _, err := store.LinkChatUser(ctx, token, arbiter.Actor{Email: owner.Email, PersonID: owner.ID}); err != nil {
		return err
	}
	in := &slack.Interactions{Store: store, Slack: client, Logger: slog.New(slog.DiscardHandler)}
	rt := &web.Router{Services: web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Queue: store},
		KeyChecker: web.NewKeyChecker(store, nil), Logger: slog.New(slog.DiscardHandler), Slack: in}
	srv := httptest.NewServer(nil)
	defer srv.Close()
	rt.Site.BaseURL, rt.Site.AppURL, rt.Site.ReviewURL = srv.URL, srv.URL, srv.URL
	srv.Config.Handler = rt.Routes()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}

	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	var mu sync.Mutex
	var failed atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / slackClickRate)
	defer tick.Stop()
	start := time.Now()
	for _, id := range ids {
		<-tick.C
		wg.Go(func() {
			payload, _ := json.Marshal(map[string]any{"type": "block_actions", "team": map[string]any{"id": "TBENCH"},
				"user": map[string]any{"id": "UBENCH"}, "response_url": fake.srv.URL + "/response",
				"actions": []map[string]any{{"type": "button", "block_id": "decide", "action_id": slack.ActionDecide + "_0",
					"value": slack.EncodeValue(id, "", "approve")}}})
			body := url.Values{"payload": {string(payload)}}.Encode()
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			mac := hmac.New(sha256.New, []byte(slackSecret))
			mac.Write([]byte("v0:" + ts + ":" + body))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/integrations/slack/interactions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Slack-Request-Timestamp", ts)
			req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
			sent := time.Now()
			resp, err := hc.Do(req)
			took := time.Since(sent)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
			mu.Lock()
			hist.RecordValue(took.Microseconds())
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	in.Wait()
	decided := 0
	for _, id := range ids {
		t, err := store.FindTaskByID(ctx, accountID, id)
		if err != nil {
			return err
		}
		if t.Status == arbiter.StatusCompleted {
			decided++
		}
	}
	// Its questions and updates are not the fan-out's to send.
	if err := store.DisconnectSlack(ctx, accountID, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		return err
	}
	b.results = append(b.results, result{name: "slack ack (200 clicks/s)", ops: int64(n), errors: failed.Load() + int64(n-decided),
		elapsed: elapsed, hist: hist, perSec: float64(n) / elapsed.Seconds(), unitName: "clicks/s"})
	b.slackNotes = append(b.slackNotes, fmt.Sprintf("slack ack p99 %.1f ms (target < %d ms) %s; %d of %d clicks decided their task",
		float64(hist.ValueAtQuantile(99))/1000, slackAckTargetMS, verdict(hist.ValueAtQuantile(99) < slackAckTargetMS*1000 && decided == n), decided, n))
	return nil
}

// measureSlackFanOut sends slackPerChannel questions to each of
// slackChannels channels through the deliverer and checks the pace of
// each channel and that none was lost.
func (b *bench) measureSlackFanOut(ctx context.Context, store *db.DB, client *slack.Client, fake *fakeSlack) error {
	fake.mu.Lock()
	fake.posts = map[string][]time.Time{}
	fake.mu.Unlock()
	want := 0
	for i := range slackChannels {
		if _, _, err := slackAccount(ctx, store, fmt.Sprintf("bench-fanout-%d@example.com", i), fmt.Sprintf("#bench-%d", i), slackPerChannel); err != nil {
			return err
		}
		want += slackPerChannel
	}
	b.logf("slack: %d questions to %d channels", want, slackChannels)
	d := worker.NewSlackDeliverer(worker.SlackConfig{Store: store, Slack: client, Poll: 20 * time.Millisecond,
		DeskURL: func(id string) string { return "http://bench.invalid/review/tasks/" + id }})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); d.Run(runCtx) }()
	count := func() (int, time.Duration) {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		n, gap := 0, time.Hour
		for ch, at := range fake.posts {
			if !strings.HasPrefix(ch, "#bench-") || ch == "#bench-acks" {
				continue
			}
			n += len(at)
			for i := 1; i < len(at); i++ {
				gap = min(gap, at[i].Sub(at[i-1]))
			}
		}
		return n, gap
	}
	deadline := time.Now().Add(time.Duration(slackPerChannel)*worker.DefaultSlackPace*3 + 30*time.Second)
	got, gap := count()
	for got < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		got, gap = count()
	}
	elapsed := time.Since(start)
	cancel()
	<-done
	b.results = append(b.results, result{name: "slack fan-out", ops: int64(got), errors: int64(want - got), elapsed: elapsed,
		perSec: float64(got) / elapsed.Seconds(), unitName: "msgs/s"})
	b.slackNotes = append(b.slackNotes, fmt.Sprintf("slack fan-out: %d of %d questions posted to %d channels; closest two posts to one channel %v apart (pace %v) %s",
		got, want, slackChannels, gap.Round(time.Millisecond), worker.DefaultSlackPace, verdict(got == want && gap >= worker.DefaultSlackPace-5*time.Millisecond)))
	return nil
}
