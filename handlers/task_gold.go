package handlers

import (
	"context"

	"github.com/arbiterhq/arbiter"
)

// withGold fills in the gold verdicts of the account's tasks (gold.go):
// for the account's own API reads and its owners' and admins' pages only,
// never for a reviewer, Slack or a webhook.
func withGold(ctx context.Context, gold arbiter.GoldService, accountID string, tasks ...*arbiter.Task) error {
	// Only tasks that can be gold cost the query: not the hot reads of
	// tasks with the agent or answered by it.
	var ids []string
	for _, t := range tasks {
		if t.MayBeGold() {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	verdicts, err := gold.GoldVerdicts(ctx, accountID, ids)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if v, ok := verdicts[t.ID]; ok {
			t.GoldVerdict = &v
		}
	}
	return nil
}

// forAPIKey makes the account's tasks what its API key reads of them:
// each gold task's gold_verdict (withGold), and while a task waits for
// votes, its votes hidden and counted (arbiter.Task.HideOpenVotes).
func forAPIKey(ctx context.Context, gold arbiter.GoldService, accountID string, tasks ...*arbiter.Task) error {
	for _, t := range tasks {
		t.HideOpenVotes()
	}
	return withGold(ctx, gold, accountID, tasks...)
}
