package worker

import "context"

// maxRecordBatch bounds the attempts recorded in one transaction.
const maxRecordBatch = 128

// recorder records the attempts of a deliverer's slots in groups: each
// slot hands its finished attempt over and waits for its outcome, while
// one loop takes every attempt that is waiting, up to maxRecordBatch, and
// records them in one transaction, so that deliveries share commits; under
// load, attempts pile up while a group is written, and the next group
// takes them all. R is an attempt to record, O its outcome.
type recorder[R, O any] struct {
	queue chan queuedRecord[R, O]
	// finished is closed when the loop has written the last attempt.
	finished chan struct{}
	// write records the attempts in one transaction and returns their
	// outcomes, or an error when none was recorded.
	write func(ctx context.Context, records []R) ([]O, error)
	// failed is the outcome of each attempt of a group write failed.
	failed func(error) O
}

// queuedRecord is an attempt waiting to be recorded, and where its
// outcome goes.
type queuedRecord[R, O any] struct {
	record R
	done   chan O
}

// newRecorder returns a recorder for slots deliveries at once; run starts
// it.
func newRecorder[R, O any](slots int, write func(context.Context, []R) ([]O, error), failed func(error) O) *recorder[R, O] {
	return &recorder[R, O]{queue: make(chan queuedRecord[R, O], slots), finished: make(chan struct{}),
		write: write, failed: failed}
}

// record hands an attempt to the loop and returns its outcome once
// written. Call it only while run runs and before close.
func (r *recorder[R, O]) record(rec R) O {
	done := make(chan O, 1)
	r.queue <- queuedRecord[R, O]{record: rec, done: done}
	return <-done
}

// close, once no slot records any more, has run write what is waiting and
// end, and waits for it.
func (r *recorder[R, O]) close() {
	close(r.queue)
	<-r.finished
}

// run records the attempts handed over until close. ctx should outlive
// the deliverer's stop: the attempts happened.
func (r *recorder[R, O]) run(ctx context.Context) {
	defer close(r.finished)
	for first := range r.queue {
		group := []queuedRecord[R, O]{first}
	fill:
		for len(group) < maxRecordBatch {
			select {
			case q, ok := <-r.queue:
				if !ok {
					break fill
				}
				group = append(group, q)
			default:
				break fill
			}
		}
		records := make([]R, len(group))
		for i, q := range group {
			records[i] = q.record
		}
		recordCtx, cancel := context.WithTimeout(ctx, recordTimeout)
		out, err := r.write(recordCtx, records)
		cancel()
		for i, q := range group {
			if err != nil {
				q.done <- r.failed(err)
			} else {
				q.done <- out[i]
			}
		}
	}
}
