package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/worker"
)

// The Teams phase (issue 50), as the Slack fan-out: questions to several
// conversations through the Teams outbox and its deliverer, in this
// process against the bench's Postgres, with a Bot Connector that answers
// at once; each conversation paced, no message lost.

const (
	teamsConversations   = 5
	teamsPerConversation = 10
)

// fakeTeams is the deliverer's Bot Connector: it notes the posts per
// conversation.
type fakeTeams struct {
	mu    sync.Mutex
	posts map[string][]time.Time
	seq   int
}

// Send notes a post to the conversation.
func (f *fakeTeams) Send(_ context.Context, _ *arbiter.TeamsConnection, _, conversationID string, _ *teams.Activity) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.posts[conversationID] = append(f.posts[conversationID], time.Now())
	return fmt.Sprintf("act-%d", f.seq), nil
}

// Update accepts a card's update.
func (f *fakeTeams) Update(context.Context, *arbiter.TeamsConnection, string, string, string, *teams.Activity) error {
	return nil
}

// count returns the posts so far and the closest two to one conversation.
func (f *fakeTeams) count() (int, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, gap := 0, time.Hour
	for _, at := range f.posts {
		n += len(at)
		for i := 1; i < len(at); i++ {
			gap = min(gap, at[i].Sub(at[i-1]))
		}
	}
	return n, gap
}

// measureTeams connects teamsConversations accounts to Teams, each with
// its default conversation, gives each teamsPerConversation tasks waiting
// for a person, and checks the pace of each conversation and that none
// was lost.
func (b *bench) measureTeams(ctx context.Context) error {
	store, err := b.openSealedStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	by := arbiter.Actor{Email: arbiter.OperatorActor}
	want := 0
	for i := range teamsConversations {
		acct, err := store.FindOrCreateAccountByEmail(ctx, fmt.Sprintf("bench-teams-%d@example.com", i))
		if err != nil {
			return err
		}
		app := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		if _, err := store.ConnectTeams(ctx, acct.ID, arbiter.TeamsConnectionInput{AppID: app,
			TenantID: "11111111-1111-4111-8111-111111111111", ClientSecret: "bench-secret"}, by); err != nil {
			return err
		}
		conv, err := store.SaveTeamsConversation(ctx, &arbiter.TeamsConversation{AccountID: acct.ID,
			ID: fmt.Sprintf("19:bench-%d@thread.tacv2", i), Name: fmt.Sprintf("bench/approvals-%d", i),
			Kind: arbiter.TeamsChannel, Title: "Bench › Approvals", ServiceURL: "https://smba.invalid/bench/"})
		if err != nil {
			return err
		}
		if err := store.SetTeamsDefault(ctx, acct.ID, conv.Name, by); err != nil {
			return err
		}
		if _, err := waitingTasks(ctx, store, acct.ID, teamsPerConversation); err != nil {
			return err
		}
		want += teamsPerConversation
	}
	b.logf("teams: %d questions to %d conversations", want, teamsConversations)
	fake := &fakeTeams{posts: map[string][]time.Time{}}
	d := worker.NewTeamsDeliverer(worker.TeamsConfig{Store: store, Teams: fake, Poll: 20 * time.Millisecond,
		DeskURL: func(id string) string { return "http://bench.invalid/review/tasks/" + id }})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); d.Run(runCtx) }()
	deadline := time.Now().Add(time.Duration(teamsPerConversation)*worker.DefaultTeamsPace*3 + 30*time.Second)
	got, gap := fake.count()
	for got < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		got, gap = fake.count()
	}
	elapsed := time.Since(start)
	cancel()
	<-done
	b.results = append(b.results, result{name: "teams fan-out", ops: int64(got), errors: int64(want - got), elapsed: elapsed,
		perSec: float64(got) / elapsed.Seconds(), unitName: "msgs/s"})
	b.teamsNotes = append(b.teamsNotes, fmt.Sprintf("teams fan-out: %d of %d questions posted to %d conversations; closest two posts to one conversation %v apart (pace %v) %s",
		got, want, teamsConversations, gap.Round(time.Millisecond), worker.DefaultTeamsPace,
		verdict(got == want && gap >= worker.DefaultTeamsPace-5*time.Millisecond)))
	return nil
}
