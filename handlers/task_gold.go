package handlers

import (
	"context"

	"github.com/arbiterhq/arbiter"
)

// withGold fills in the gold verdicts of the account's tasks (gold.go):
// for the account's own API reads and its owners' and admins' pages only,
// never for a reviewer, Slack or a webhook.
func withGold(ctx context.Context, gold arbiter.GoldService, accountID string, tasks ...*arbiter.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
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
