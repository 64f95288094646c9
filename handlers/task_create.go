package handlers

import (
	"context"
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// Headers of idempotent creates (the IETF httpapi draft "The
// Idempotency-Key HTTP Header Field").
const (
	// IdempotencyKeyHeader carries the caller's key for a create.
	IdempotencyKeyHeader = "Idempotency-Key"
	// IdempotentReplayedHeader is "true" on the answer to a create that
	// replays an earlier one.
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// TaskCreate handles POST /v1/tasks: it validates the body, stores a pending
// task for the authenticated account and answers the Task object. With an
// Idempotency-Key header, a retry of an earlier create answers that
// create's task as it is now, marked Idempotent-Replayed. created is called
// with 1 after each new task, so an in-process worker can start at once. A
// callback_url must be https:// on a public address unless
// allowPrivateCallbacks.
func TaskCreate(tasks arbiter.TaskService, created func(n int), allowPrivateCallbacks bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := idempotencyKey(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		answer, err := createTask(r.Context(), tasks, created, body, key, allowPrivateCallbacks)
		if err != nil {
			Error(w, r, err)
			return
		}
		if answer.Replayed {
			w.Header().Set(IdempotentReplayedHeader, "true")
		}
		JSON(w, http.StatusOK, answer.Task)
	})
}

// createTask stores the task-create request body for the context's
// account, under the idempotency key when it is not "", and calls created
// with 1 after a new task. Its callback_url is checked as
// arbiter.TaskCreate.CheckCallbackURL says. The error is why nothing was
// stored.
func createTask(ctx context.Context, tasks arbiter.TaskService, created func(n int), body []byte, key string, allowPrivateCallbacks bool) (arbiter.TaskCreated, error) {
	in, err := arbiter.ParseTaskCreate(body)
	if err != nil {
		return arbiter.TaskCreated{}, err
	}
	if err := in.CheckCallbackURL(allowPrivateCallbacks); err != nil {
		return arbiter.TaskCreated{}, err
	}
	in.IdempotencyKey = key
	answers, err := tasks.CreateTasks(ctx, arbiter.AccountIDFromContext(ctx), []arbiter.TaskCreate{in})
	if err != nil {
		return arbiter.TaskCreated{}, err
	}
	answer := answers[0]
	if answer.Err != nil {
		return arbiter.TaskCreated{}, answer.Err
	}
	if !answer.Replayed && created != nil {
		created(1)
	}
	// A replay answers the task as it is now.
	answer.Task.HideOpenVotes()
	return answer, nil
}

// idempotencyKey returns the request's Idempotency-Key, or "" when it has
// none. A key that breaks the rules, or more than one, is EINVALID.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(IdempotencyKeyHeader)
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return values[0], arbiter.ValidateIdempotencyKey(values[0])
	}
	return "", arbiter.Errorf(arbiter.EINVALID, "Send at most one Idempotency-Key header.")
}
