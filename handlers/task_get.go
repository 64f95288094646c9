package handlers

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/arbiterhq/arbiter"
)

// answerTime is how long a long-polling request has to write its answer
// once its wait is over; its write deadline is moved past the wait by this.
const answerTime = 30 * time.Second

// TaskGet handles GET /v1/tasks/{id}: the account's task, or 404 for an id
// that is unknown, malformed or another account's. A gold task's answer
// carries its gold_verdict: this is the account's own read.
//
// With ?wait=N (whole seconds, 0 to 60) it answers as soon as the task is
// in a final state, or after N seconds with the task as it is then, and at
// once when shutdown closes (the server is stopping). A waiting request
// holds no database connection: watcher wakes it when the task may have
// changed, and it reads the task again.
func TaskGet(tasks arbiter.TaskService, watcher arbiter.TaskWatcher, shutdown <-chan struct{}) http.Handler {
	if watcher == nil {
		watcher = unwatched{}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The query string could not be read; escape it as a URL query."))
			return
		}
		wait, err := arbiter.ParseWait(query["wait"])
		if err != nil {
			Error(w, r, err)
			return
		}
		accountID, id := arbiter.AccountIDFromContext(r.Context()), r.PathValue("id")
		var task *arbiter.Task
		if wait == 0 {
			task, err = tasks.FindTaskByID(r.Context(), accountID, id)
		} else {
			// The server's write timeout counts from the request; the
			// answer comes after the wait.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + answerTime))
			task, err = waitForFinal(r.Context(), tasks, watcher, accountID, id, wait, shutdown)
		}
		if err != nil {
			Error(w, r, err)
			return
		}
		if task == nil {
			return // the caller left while waiting
		}
		if err := withGold(r.Context(), tasks, accountID, task); err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, task)
	})
}

// waitForFinal reads the account's task until it is final, wait has passed
// or shutdown closes, reading it again each time watcher wakes it, and
// returns the last read; nil when the caller left.
func waitForFinal(ctx context.Context, tasks arbiter.TaskService, watcher arbiter.TaskWatcher,
	accountID, id string, wait time.Duration, shutdown <-chan struct{}) (*arbiter.Task, error) {
	// Watch first: a transition between the read and the watch would
	// otherwise go unseen.
	wake, stop := watcher.WatchTask(id)
	defer stop()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		task, err := tasks.FindTaskByID(ctx, accountID, id)
		if err != nil || task.Final() {
			return task, err
		}
		// The task is not kept while waiting: thousands of waiters would
		// hold thousands of contexts.
		task = nil
		select {
		case <-wake:
			continue
		case <-timer.C:
		case <-shutdown:
		case <-ctx.Done():
			// The caller left: nobody reads an answer.
			return nil, nil
		}
		return tasks.FindTaskByID(ctx, accountID, id)
	}
}

// unwatched is the watcher of a server without one: nothing wakes its
// waits, which last their time.
type unwatched struct{}

func (unwatched) WatchTask(string) (<-chan struct{}, func()) { return nil, func() {} }
