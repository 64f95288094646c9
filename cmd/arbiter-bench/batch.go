package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// batchSize is how many tasks one POST /v1/tasks/batch carries: the most
// the API accepts.
const batchSize = 100

// batchBody is a batch of batchSize copies of taskBody.
var batchBody = func() []byte {
	items := make([]json.RawMessage, batchSize)
	for i := range items {
		items[i] = taskBody
	}
	b, _ := json.Marshal(map[string]any{"tasks": items})
	return b
}()

// batchPhase measures POST /v1/tasks/batch: requests per second become
// tasks per second (every item must be stored), latency is per request.
func (b *bench) batchPhase(ctx context.Context, client *http.Client, base string, keys []string) result {
	r := b.phase(ctx, "batch create (HTTP)", func(w, i int) error {
		a := (w + i*b.concurrency) % len(keys)
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/tasks/batch", bytes.NewReader(batchBody))
		req.Header.Set("Authorization", "Bearer "+keys[a])
		req.Header.Set("Content-Type", "application/json")
		var answer struct {
			Results []struct{ Status int } `json:"results"`
		}
		if err := do(client, req, &answer); err != nil {
			return err
		}
		if len(answer.Results) != batchSize {
			return fmt.Errorf("a batch of %d answered %d results", batchSize, len(answer.Results))
		}
		for _, res := range answer.Results {
			if res.Status != http.StatusOK {
				return fmt.Errorf("a batch item answered %d", res.Status)
			}
		}
		return nil
	})
	// Each request stored batchSize tasks; CPU per operation is per task.
	r.ops *= batchSize
	r.perSec *= batchSize
	r.unitName = "tasks/s"
	return r
}
