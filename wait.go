package arbiter

import "time"

// MaxWait is the longest a GET /v1/tasks/{id}?wait=N request waits for its
// task to reach a final state.
const MaxWait = 60 * time.Second

// FinalStatus reports whether status is one a task never leaves: completed
// or expired. A waiting request answers as soon as its task reaches one.
func FinalStatus(status string) bool {
	return status == StatusCompleted || status == StatusExpired
}

// Final reports whether the task is in a final status.
func (t *Task) Final() bool { return FinalStatus(t.Status) }

// ParseWait reads the wait query parameter of a task read: the values the
// query holds for it (none: no wait). It must be given at most once, as a
// whole number of seconds from 0 to MaxWait written in decimal digits only.
// Returns EINVALID otherwise.
func ParseWait(values []string) (time.Duration, error) {
	if len(values) == 0 {
		return 0, nil
	}
	if len(values) == 1 {
		if n, ok := parseSmallInt(values[0]); ok && n <= int(MaxWait/time.Second) {
			return time.Duration(n) * time.Second, nil
		}
	}
	return 0, FieldErrorf("wait", "wait must be given once, as a whole number of seconds from 0 to %d.", int(MaxWait/time.Second))
}

// TaskWatcher wakes the requests that wait for tasks to reach a final
// state. The store implements it: every transition to a final state, made by
// this process or (on Postgres) by any other, wakes the task's watchers. A
// watcher holds no database connection.
type TaskWatcher interface {
	// WatchTask starts watching the task. wake receives a value after the
	// task may have reached a final state; a wake may also be spurious (a
	// lost database connection came back, say), so the watcher reads the
	// task to see. Watch before reading the task, so that no transition
	// falls between the read and the watch. stop ends the watch; call it
	// once.
	WatchTask(taskID string) (wake <-chan struct{}, stop func())
}

// ExpiredError is the ECONFLICT error of a change refused because the
// task's deadline passed first: a reviewer's late verdict, a verifier's
// late answer. expiredAt, when known, is when the task expired.
func ExpiredError(expiredAt *Timestamp) *Error {
	e := Errorf(ECONFLICT, "The task expired: its deadline passed before it was decided, and nothing was recorded.")
	if expiredAt != nil {
		e = Errorf(ECONFLICT, "The task expired at %s UTC: its deadline passed before it was decided, and nothing was recorded.",
			expiredAt.Time().Format("2006-01-02 15:04:05"))
	}
	e.Reason = ReasonTaskExpired
	return e
}
