package handlers

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter"
)

// answerTime is how long a long-polling request has to write its answer
// once its wait is over; its write deadline is moved past the wait by this.
const answerTime = 30 * time.Second

// maxAnswering is how many waiting requests read their task and write their
// answer at once. When thousands of waits end together (their tasks
// decided in one batch, or shutdown), each would otherwise read, encode
// and write at once, and their stacks and garbage would all grow
// together: 10,000 waiters held in 302–343 MB of RSS peaked at 390–427 MB
// as they were answered (docs/benchmarks.md). The rest wait for a slot, as
// cheaply as they waited for their task; the store serves fewer reads at
// once than this anyway.
const maxAnswering = 32

// answerSlots bounds the waiting requests that answer at once.
type answerSlots struct {
	slots   chan struct{}
	waiting atomic.Int32 // requests waiting for a slot
}

func newAnswerSlots(n int) *answerSlots { return &answerSlots{slots: make(chan struct{}, n)} }

// take waits for a slot, and reports false when ctx ends first.
func (a *answerSlots) take(ctx context.Context) bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
	}
	a.waiting.Add(1)
	defer a.waiting.Add(-1)
	select {
	case a.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// give gives a slot back.
func (a *answerSlots) give() { <-a.slots }

// Waiters admits the requests that wait for a task. web.Waiters
// implements it.
type Waiters interface {
	// Enter admits r, a request of an API key, to wait for its task. It
	// returns ERATELIMIT (with RetryAfter) when the key or its account
	// already has its most requests waiting, and the store's EUNAVAILABLE
	// when the bounds are kept in a store that does not answer.
	Enter(r *http.Request) (Waiter, error)
}

// Waiter is a request admitted to wait for its task.
type Waiter struct {
	// Evicted is closed when the server needs the request's connection
	// for another caller (nil: never): the wait ends at once, answered as
	// one whose time is up, and the connection closes after the answer.
	Evicted <-chan struct{}
	// Leave counts the request out of the waiting ones; call it once, when
	// it is answered or its caller left.
	Leave func()
	// Recheck checks the request's key again before its answer (nil: no
	// need): the wait outlives the check the request came in with. It
	// returns EUNAUTHORIZED once the key is revoked.
	Recheck func(ctx context.Context) error
}

// TaskGet handles GET /v1/tasks/{id}: the account's task, or 404 for an id
// that is unknown, malformed or another account's. A gold task's answer
// carries its gold_verdict: this is the account's own read.
//
// With ?wait=N (whole seconds, 0 to 60) it answers as soon as the task is
// in a final state, or after N seconds with the task as it is then, and at
// once when shutdown closes (the server is stopping) or the server needs
// the connection (see Waiter). A waiting request holds no database
// connection: watcher wakes it when the task may have changed, and it
// reads the task again. A request whose first read found its task not
// final waits only when waiters admit it, which check its key again
// before the answer: 401 once the key is revoked.
//
// With a parker, a waiting HTTP/1.1 request is parked (see Parker): its
// connection waits without the request, and the parker answers it as this
// handler would.
func TaskGet(tasks arbiter.TaskService, watcher arbiter.TaskWatcher, shutdown <-chan struct{}, waiters Waiters, parker Parker) http.Handler {
	return taskGet(tasks, watcher, shutdown, newAnswerSlots(maxAnswering), waiters, parker)
}

func taskGet(tasks arbiter.TaskService, watcher arbiter.TaskWatcher, shutdown <-chan struct{}, answering *answerSlots, waiters Waiters, parker Parker) http.Handler {
	if watcher == nil {
		watcher = unwatched{}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var query url.Values
		if r.URL.RawQuery != "" { // most gets ask nothing: no map to make
			var err error
			if query, err = url.ParseQuery(r.URL.RawQuery); err != nil {
				Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The query string could not be read; escape it as a URL query."))
				return
			}
		}
		wait, err := arbiter.ParseWait(query["wait"])
		if err != nil {
			Error(w, r, err)
			return
		}
		accountID, id := arbiter.AccountIDFromContext(r.Context()), r.PathValue("id")
		var task *arbiter.Task
		var waited waitOutcome
		if wait == 0 {
			task, err = tasks.FindTaskByID(r.Context(), accountID, id)
		} else {
			// The server's write timeout counts from the request; the
			// answer comes after the wait.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + answerTime))
			hooks := waitHooks{enter: func() (Waiter, error) { return enterWait(waiters, r) }}
			if parker != nil {
				hooks.park = func(wake <-chan struct{}, stop func(), waiter Waiter) bool {
					return parkWaiter(w, r, parker, tasks, wake, stop, waiter, accountID, id, wait)
				}
			}
			var answered func()
			task, answered, waited, err = waitForFinal(r.Context(), tasks, watcher, answering, accountID, id, wait, shutdown, hooks)
			// The answer is read, encoded and written in its slot.
			defer answered()
			if waited.evicted {
				w.Header().Set("Connection", "close")
			}
			AskForKey(w.Header(), err)
		}
		if err != nil {
			Error(w, r, err)
			return
		}
		if task == nil {
			return // the caller left while waiting, or it was parked
		}
		if err := forAPIKey(r.Context(), tasks, accountID, task); err != nil {
			Error(w, r, err)
			return
		}
		if wait > 0 {
			status, body := offStack(func() (int, []byte) { return encodeJSON(http.StatusOK, task) })
			writeJSON(w, status, body)
			return
		}
		JSON(w, http.StatusOK, task)
	})
}

// enterWait admits r to wait through waiters; without waiters every
// request waits, and nothing ends its wait early.
func enterWait(waiters Waiters, r *http.Request) (Waiter, error) {
	if waiters == nil {
		return Waiter{Leave: func() {}}, nil
	}
	return waiters.Enter(r)
}

// waitHooks are what a waiting request of the API does beyond waiting:
// enter, when its first read found the task not final, admits it to wait
// (nil: it waits unbounded); park, when set, takes it off its goroutine
// (see Parker) and reports whether it did.
type waitHooks struct {
	enter func() (Waiter, error)
	park  func(wake <-chan struct{}, stop func(), waiter Waiter) bool
}

// waitOutcome says how a wait went: whether it was evicted.
type waitOutcome struct {
	evicted bool
}

// waitForFinal reads the account's task until it is final, wait has passed
// or shutdown closes, reading it again each time watcher wakes it, and
// returns the last read; nil when the caller left, or when hooks.park took
// the request, with the watch, after the first read found the task not
// final. Each read after the first is made in one of answering's slots,
// which is held when the task is returned, until answered is called.
func waitForFinal(ctx context.Context, tasks arbiter.TaskService, watcher arbiter.TaskWatcher, answering *answerSlots,
	accountID, id string, wait time.Duration, shutdown <-chan struct{},
	hooks waitHooks) (task *arbiter.Task, answered func(), outcome waitOutcome, err error) {
	// Watch first: a transition between the read and the watch would
	// otherwise go unseen.
	wake, stop := watcher.WatchTask(id)
	parked := false
	defer func() {
		if !parked {
			stop()
		}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	task, err = tasks.FindTaskByID(ctx, accountID, id)
	if err != nil || task.Final() {
		return task, func() {}, outcome, err
	}
	waiter := Waiter{Leave: func() {}}
	if hooks.enter != nil {
		if waiter, err = hooks.enter(); err != nil {
			return nil, func() {}, outcome, err
		}
	}
	if hooks.park != nil && hooks.park(wake, stop, waiter) {
		parked = true
		return nil, func() {}, outcome, nil
	}
	defer waiter.Leave()
	for err == nil && !task.Final() {
		// The task is not kept while waiting: thousands of waiters would
		// hold thousands of contexts.
		task = nil
		last := true
		select {
		case <-wake:
			last = false
		case <-timer.C:
		case <-shutdown:
		case <-waiter.Evicted:
			outcome.evicted = true
		case <-ctx.Done():
			// The caller left: nobody reads an answer.
			return nil, func() {}, outcome, nil
		}
		if !answering.take(ctx) {
			return nil, func() {}, outcome, nil
		}
		// Off the request's goroutine, as the answer is encoded.
		task, err = offStack(func() (*arbiter.Task, error) { return tasks.FindTaskByID(ctx, accountID, id) })
		if last || err != nil || task.Final() {
			if err == nil && waiter.Recheck != nil {
				// The key may have been revoked while the request waited.
				err = waiter.Recheck(ctx)
			}
			return task, answering.give, outcome, err
		}
		answering.give()
	}
	return task, func() {}, outcome, err
}

// offStack returns f(), called on a goroutine of its own. A waiting
// request's goroutine lives on with its connection, keep-alive, after the
// answer: what it grows its stack to, it keeps until collections shrink it.
// A store read and a JSON encoding grow it past the 8 KB it waits with,
// and 10,000 waiters answered together would keep that at once; a
// goroutine that ends gives its stack back. A panic in f is raised again
// in the caller.
func offStack[T1, T2 any](f func() (T1, T2)) (T1, T2) {
	type result struct {
		v1    T1
		v2    T2
		panic any
	}
	c := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.panic = p
			}
			c <- r
		}()
		r.v1, r.v2 = f()
	}()
	r := <-c
	if r.panic != nil {
		panic(r.panic)
	}
	return r.v1, r.v2
}

// unwatched is the watcher of a server without one: nothing wakes its
// waits, which last their time.
type unwatched struct{}

func (unwatched) WatchTask(string) (<-chan struct{}, func()) { return nil, func() {} }
