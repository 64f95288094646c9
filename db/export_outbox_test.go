package db

import (
	"context"
	"sync"

	"github.com/arbiterhq/arbiter"
)

// RecordingOutbox is an outbox for the registry's tests: it records the
// events each publish hands it, and fails while Fail is set.
type RecordingOutbox struct {
	mu     sync.Mutex
	events []arbiter.TaskEvent
	// Fail, when set, is the error every enqueue returns.
	Fail error
}

func (o *RecordingOutbox) enqueue(_ context.Context, _ *Tx, events []arbiter.TaskEvent) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Fail != nil {
		return o.Fail
	}
	o.events = append(o.events, events...)
	return nil
}

// Events returns the events the outbox was handed, in order.
func (o *RecordingOutbox) Events() []arbiter.TaskEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]arbiter.TaskEvent(nil), o.events...)
}

// SetFail sets the error every enqueue returns (nil: none).
func (o *RecordingOutbox) SetFail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Fail = err
}

// RegisterOutbox registers o after the channels Open registers, as a new
// channel's line in Open would.
func (d *DB) RegisterOutbox(o *RecordingOutbox) { d.register(o) }
