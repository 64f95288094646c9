package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// TaskBatchCreate handles POST /v1/tasks/batch: {"tasks": [TaskCreate, …]}
// with 1 to arbiter.MaxBatchTasks items, each of which may carry an
// "idempotency_key". A batch is not atomic: the answer is 200 with one
// result per item, in order, each {"kind": "task", "status": 200, "task": …,
// "replayed": …} or {"kind": "error", "status": 400|409|422|429, "error":
// "…", "code": "…"} (and "field"); kind is the document's discriminator. An envelope that is not
// valid, or too large, is answered as a whole and stores nothing. created
// is called once with the number of new tasks when the batch stored any.
// Callback URLs are checked as TaskCreate checks them.
func TaskBatchCreate(tasks arbiter.TaskService, created func(n int), allowPrivateCallbacks bool) http.Handler {
	type result struct {
		Kind     string        `json:"kind"`
		Status   int           `json:"status"`
		Task     *arbiter.Task `json:"task,omitempty"`
		Replayed *bool         `json:"replayed,omitempty"`
		Error    string        `json:"error,omitempty"`
		Code     string        `json:"code,omitempty"`
		Field    string        `json:"field,omitempty"`
	}
	failed := func(err error) result {
		e := ErrorBodyOf(err)
		return result{Kind: "error", Status: StatusOf(err), Error: e.Error, Code: e.Code, Field: e.Field}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values(IdempotencyKeyHeader)) > 0 {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID,
				"A batch takes an idempotency_key on each task, not the Idempotency-Key header."))
			return
		}
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		items, err := arbiter.ParseTaskBatch(body)
		if err != nil {
			Error(w, r, err)
			return
		}
		results := make([]result, len(items))
		var valid []arbiter.TaskCreate
		var positions []int // valid[i] is item positions[i]
		for i, item := range items {
			if item.Err == nil {
				item.Err = item.Create.CheckCallbackURL(allowPrivateCallbacks)
			}
			if item.Err != nil {
				results[i] = failed(item.Err)
				continue
			}
			valid = append(valid, item.Create)
			positions = append(positions, i)
		}
		if len(valid) > 0 {
			answers, err := tasks.CreateTasks(r.Context(), arbiter.AccountIDFromContext(r.Context()), valid)
			if err != nil {
				Error(w, r, err)
				return
			}
			stored := 0
			for n, answer := range answers {
				if answer.Err != nil {
					results[positions[n]] = failed(answer.Err)
					continue
				}
				replayed := answer.Replayed
				answer.Task.HideOpenVotes() // a replay answers the task as it is now
				results[positions[n]] = result{Kind: "task", Status: http.StatusOK, Task: answer.Task, Replayed: &replayed}
				if !replayed {
					stored++
				}
			}
			if stored > 0 && created != nil {
				created(stored)
			}
		}
		JSON(w, http.StatusOK, struct {
			Results []result `json:"results"`
		}{results})
	})
}
