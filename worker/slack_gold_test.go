package worker_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/slack/slackfake"
)

// TestSlackDeliverer_AGoldTaskLooksLikeAnyOther: a gold task's question
// goes to the channel at once (people decide it) and names neither gold
// nor its gold verdict more often than the other verdict; once a reviewer
// answered, the outcome says their answer, never the gold verdict.
func TestSlackDeliverer_AGoldTaskLooksLikeAnyOther(t *testing.T) {
	const kestrel, plover = "verdict-kestrel", "verdict-plover"
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{Prompt: "Refund order 1234?", AllowedVerdicts: []string{kestrel, plover},
				ConfidenceThreshold: 0.8, TaskType: "decide", Touchpoint: "chat", Context: []byte(`{"amount":12}`), GoldVerdict: kestrel})

			post := blocksOf(t, fake.WaitCalls(t, "chat.postMessage", 1)[0])
			if strings.Contains(strings.ToLower(post), "gold") {
				t.Errorf("the question mentions gold:\n%s", post)
			}
			if k, p := strings.Count(post, kestrel), strings.Count(post, plover); k != p || k == 0 {
				t.Errorf("the question shows the gold verdict %d times and the other %d:\n%s", k, p, post)
			}

			if _, err := store.DecideTask(ctx, accountID, taskID, arbiter.HumanDecision{Verdict: plover, Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			update := blocksOf(t, fake.WaitCalls(t, "chat.update", 1)[0])
			if strings.Contains(strings.ToLower(update), "gold") || strings.Contains(update, kestrel) || !strings.Contains(update, plover) {
				t.Errorf("the outcome gives the gold verdict away, or lacks the answer:\n%s", update)
			}
		})
	}
}
