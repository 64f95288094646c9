package db

import (
	"database/sql"
	"sync"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.TaskWatcher = (*DB)(nil)

// Waking requests that wait for a task (GET /v1/tasks/{id}?wait=N).
//
// A transition to a final state publishes the task's id: in this process
// right after its commit (Tx.committed), and on Postgres also with pg_notify in the
// transaction itself, so every process hears of it once it commits. Each
// process keeps one LISTEN connection (db/internal/pglisten), opened at its
// first watch, and fans what it hears out to its watchers; a watcher is a
// channel in a map, so thousands of waiting requests cost memory and no
// connection. After the listener connects, and whenever it reconnects
// after losing its connection, every watcher is woken to read its task
// again, since notifications sent meanwhile are lost.

// taskChannel is the Postgres notification channel of final transitions,
// whose payload is the task's id, and of creates (createdPayload,
// announce.go).
const taskChannel = "arbiter_tasks"

// watchers fans wake-ups out to the watchers of each task.
type watchers struct {
	mu     sync.Mutex
	byTask map[string][]chan struct{}
	count  int
	// created receives when the listener hears that tasks were created
	// (TasksCreated), and when it (re)connects.
	created chan struct{}
}

// WatchTask starts watching a task for a final transition (see
// arbiter.TaskWatcher). On Postgres the first watch opens the process's
// listener connection.
func (d *DB) WatchTask(taskID string) (<-chan struct{}, func()) {
	w := &d.watchers
	c := make(chan struct{}, 1)
	w.mu.Lock()
	if w.byTask == nil {
		w.byTask = map[string][]chan struct{}{}
	}
	w.byTask[taskID] = append(w.byTask[taskID], c)
	w.count++
	w.mu.Unlock()
	if d.notifies() {
		d.listener.Start()
	}
	var once sync.Once
	return c, func() { once.Do(func() { w.remove(taskID, c) }) }
}

// Waiting returns how many watches are open.
func (d *DB) Waiting() int {
	d.watchers.mu.Lock()
	defer d.watchers.mu.Unlock()
	return d.watchers.count
}

func (w *watchers) remove(taskID string, c chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.byTask[taskID]
	for i, other := range list {
		if other == c {
			list[i] = list[len(list)-1]
			list = list[:len(list)-1]
			w.count--
			break
		}
	}
	if len(list) == 0 {
		delete(w.byTask, taskID)
	} else {
		w.byTask[taskID] = list
	}
}

// wake wakes the watchers of the tasks; a watcher already woken stays so.
func (w *watchers) wake(taskIDs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range taskIDs {
		for _, c := range w.byTask[id] {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// wakeCreated signals TasksCreated.
func (w *watchers) wakeCreated() {
	select {
	case w.created <- struct{}{}:
	default:
	}
}

// wakeAll wakes every watcher, and TasksCreated.
func (w *watchers) wakeAll() {
	w.wakeCreated()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, list := range w.byTask {
		for _, c := range list {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// heard wakes the watchers of what the listener heard: a task's id, or
// createdPayload.
func (w *watchers) heard(payload string) {
	if payload == createdPayload {
		w.wakeCreated()
		return
	}
	w.wake(payload)
}

// updatedColumns is what a sqlPublishing update returns of each task.
const updatedColumns = `id, status, account_id, callback_url`

// updatedTask is a task a sqlPublishing statement changed.
type updatedTask struct {
	id, status, accountID string
	// callbackURL is the task's callback_url, "" without one.
	callbackURL string
}

// scanUpdated reads the rows of a sqlPublishing statement and closes them:
// the tasks it updated.
func scanUpdated(rows *sql.Rows) ([]updatedTask, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var updated []updatedTask
	for rows.Next() {
		var u updatedTask
		var callback sql.NullString
		var notified any
		dest := []any{&u.id, &u.status, &u.accountID, &callback, &notified}[:len(cols)]
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		u.callbackURL = callback.String
		updated = append(updated, u)
	}
	return updated, rows.Err()
}

// finalIDs returns the ids of the updated tasks left in a final status.
func finalIDs(updated []updatedTask) []string {
	var final []string
	for _, u := range updated {
		if arbiter.FinalStatus(u.status) {
			final = append(final, u.id)
		}
	}
	return final
}

// OpenConnections returns how many connections of the pool are open.
func (d *DB) OpenConnections() int { return d.db.Stats().OpenConnections }
