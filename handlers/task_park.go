package handlers

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Parker takes over the connection of a request that waits for its task,
// so that what net/http keeps for each request it serves (the handler's
// goroutine, the connection's buffers, the request) goes while it waits.
// web.ParkingLot implements it.
type Parker interface {
	// Park takes over w's connection, once r is read, and answers it with
	// p.Answer when p.Wake, p.Wait, p.Evicted or shutdown ends the wait;
	// when the caller closes the connection first, it tells p.Answered
	// (StatusCallerLeft) at once and answers nothing. It reports
	// false, having done nothing, when it cannot (HTTP/2, a request with a
	// body or one that closes its connection, a connection that cannot be
	// taken over): the handler answers as usual then.
	Park(w http.ResponseWriter, r *http.Request, p Parked) bool
}

// Parked is a waiting request that a Parker answers.
type Parked struct {
	// Wake and Stop are the task's watch; the Parker stops it when the
	// request is answered.
	Wake <-chan struct{}
	Stop func()
	// Wait is how long the request waits at most.
	Wait time.Duration
	// Evicted ends the wait early, as if its time were up, when the server
	// needs the connection: the answer closes it (nil: never).
	Evicted <-chan struct{}
	// Answer reads the task again and returns the answer, or ok false when
	// the task is not final and last is false: the wait goes on. last is
	// true when the wait is over (its time is up, or shutdown).
	Answer func(last bool) (a Answer, ok bool)
	// Answered tells the request log and the metrics what was answered
	// (see AnswerLater), StatusCallerLeft when nothing was; it is called
	// once.
	Answered func(status, bytes int)
}

// Answer is a parked request's answer: its status, the headers the
// handler adds to those the middleware set, and its body. The Parker adds
// what net/http would (Date, Content-Length or chunking, Connection).
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// answerLater is what middleware does once a parked request is answered.
type answerLater struct {
	mu            sync.Mutex
	done          bool
	status, bytes int
	hooks         []func(status, bytes int)
}

// then calls f once the request is answered, at once if it was.
func (a *answerLater) then(f func(status, bytes int)) {
	a.mu.Lock()
	if !a.done {
		a.hooks = append(a.hooks, f)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	f(a.status, a.bytes)
}

// answered calls the hooks.
func (a *answerLater) answered(status, bytes int) {
	a.mu.Lock()
	a.done, a.status, a.bytes = true, status, bytes
	hooks := a.hooks
	a.hooks = nil
	a.mu.Unlock()
	for _, f := range hooks {
		f(status, bytes)
	}
}

// IsParked reports whether the handler of ctx's request parked it (see
// Parker): it is not answered when the handler returns, and middleware
// that logs or counts answers does so with AnswerLater. ctx must carry the
// request's logger (NewContextWithRequestLogger).
func IsParked(ctx context.Context) bool {
	l, ok := ctx.Value(loggerKey{}).(*lazyLogger)
	return ok && l.later != nil
}

// AnswerLater calls f with the status and the bytes of the body of ctx's
// parked request once it is answered (at once if it was). It does nothing
// when the request was not parked.
func AnswerLater(ctx context.Context, f func(status, bytes int)) {
	if l, ok := ctx.Value(loggerKey{}).(*lazyLogger); ok && l.later != nil {
		l.later.then(f)
	}
}

// parkedContext returns a context that carries what ctx's handlers need to
// answer after the request is gone (its logger and its answer format), and
// nothing else of the request's: a parked request keeps it.
func parkedContext(ctx context.Context) context.Context {
	parked := context.Background()
	if l := ctx.Value(loggerKey{}); l != nil {
		parked = context.WithValue(parked, loggerKey{}, l)
	}
	if f := ctx.Value(formatKey{}); f != nil {
		parked = context.WithValue(parked, formatKey{}, f)
	}
	return parked
}

// markParked makes AnswerLater report ctx's request as parked, and
// returns what tells the middleware that it is answered.
func markParked(ctx context.Context) func(status, bytes int) {
	l, ok := ctx.Value(loggerKey{}).(*lazyLogger)
	if !ok {
		return func(int, int) {}
	}
	l.later = &answerLater{}
	return l.later.answered
}

// StatusCallerLeft is the status a request is logged and counted with
// when its caller closed the connection before it was answered: nothing
// was answered (nginx's 499, "client closed request"). Error answers it
// to a request whose caller left.
const StatusCallerLeft = 499

// parkWaiter parks the request waiting for the account's task id, whose
// watch (wake, stop) is open, whose first read found it not final and
// which waiter admitted: it reports whether parker took it (see Parker).
// Its answer is the handler's: the task, or 401 once its key is revoked.
func parkWaiter(w http.ResponseWriter, r *http.Request, parker Parker, tasks arbiter.TaskService, wake <-chan struct{}, stop func(),
	waiter Waiter, accountID, id string, wait time.Duration) bool {
	ctx, path := parkedContext(r.Context()), r.URL.Path
	answer := func(last bool) (Answer, bool) {
		ctx, cancel := context.WithTimeout(ctx, answerTime)
		defer cancel()
		task, err := tasks.FindTaskByID(ctx, accountID, id)
		if err == nil && !task.Final() && !last {
			return Answer{}, false
		}
		if err == nil && waiter.Recheck != nil {
			err = waiter.Recheck(ctx)
		}
		if err == nil {
			err = forAPIKey(ctx, tasks, accountID, task)
		}
		if err != nil {
			return errorAnswer(ctx, path, err), true
		}
		status, body := encodeJSON(http.StatusOK, task)
		return Answer{Status: status, Header: http.Header{"Content-Type": jsonContentType}, Body: body}, true
	}
	// Marked before Park: a wait that ends at once may be answered before
	// Park returns.
	answered := markParked(r.Context())
	leaveAndLog := func(status, bytes int) {
		waiter.Leave()
		answered(status, bytes)
	}
	if parker.Park(w, r, Parked{Wake: wake, Stop: stop, Wait: wait, Evicted: waiter.Evicted, Answer: answer, Answered: leaveAndLog}) {
		return true
	}
	if l, ok := r.Context().Value(loggerKey{}).(*lazyLogger); ok {
		l.later = nil
	}
	return false
}

// errorAnswer is the answer Error gives to a GET of path that failed with
// err, in ctx (see parkedContext).
func errorAnswer(ctx context.Context, path string, err error) Answer {
	r := (&http.Request{Method: http.MethodGet, URL: &url.URL{Path: path}, Header: http.Header{}}).WithContext(ctx)
	rec := answerRecorder{header: http.Header{}}
	AskForKey(rec.header, err)
	Error(&rec, r, err)
	return Answer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
}
