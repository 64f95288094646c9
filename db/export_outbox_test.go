package db

import (
	"context"
	"slices"
	"sync"

	"github.com/arbiterhq/arbiter"
)

// RecordingOutbox is an outbox for the registry's tests: it records the
// events each publish hands it and the steps it took, and fails while
// Fail is set.
type RecordingOutbox struct {
	mu     sync.Mutex
	events []arbiter.TaskEvent
	steps  []OutboxStep
	// Fail, when set, is the error every plan returns.
	Fail error
}

// OutboxStep is a step of an outbox in a transaction: "plan" or "write",
// and how many receipts the transaction had signed when it ran.
type OutboxStep struct {
	Step     string
	Receipts int
}

func (o *RecordingOutbox) plan(_ context.Context, tx *Tx, events []arbiter.TaskEvent) (outboxWrite, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Fail != nil {
		return nil, o.Fail
	}
	o.events = append(o.events, events...)
	o.steps = append(o.steps, OutboxStep{"plan", len(tx.receipts)})
	return func(_ context.Context, tx *Tx) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.steps = append(o.steps, OutboxStep{"write", len(tx.receipts)})
		return nil
	}, nil
}

// Steps returns the steps the outbox took, in order.
func (o *RecordingOutbox) Steps() []OutboxStep {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.steps)
}

// Events returns the events the outbox was handed, in order.
func (o *RecordingOutbox) Events() []arbiter.TaskEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]arbiter.TaskEvent(nil), o.events...)
}

// SetFail sets the error every plan returns (nil: none).
func (o *RecordingOutbox) SetFail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Fail = err
}

// RegisterOutbox registers o after the channels Open registers, as a new
// channel's line in Open would.
func (d *DB) RegisterOutbox(o *RecordingOutbox) { d.register(o) }
