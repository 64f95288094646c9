package worker

import (
	"context"
	"time"

	"github.com/arbiterhq/arbiter"
)

// recordRetry is the first wait before a record the store could not take
// is sent again; each wait doubles, up to a second.
const recordRetry = 50 * time.Millisecond

// recordAgain calls record, and calls it again while the store is
// unavailable (EUNAVAILABLE: a primary lost and its standby not yet
// promoted, a restart), 50 ms later and doubling to a second, until the
// next try would come after the claim's lease ends at leaseEnds or stop
// is closed (the worker or deliverer stops); again says whether record
// was called more than once. Each try has a context of its own, ctx's
// values without its cancellation, bounded by recordTimeout: the record
// outlives a stop, but not a hung store.
//
// What is recorded happened (a verifier's call, a delivery): a record
// given up leaves its item claimed until the lease runs out, and then it
// is made again (the verifier asked again, the receiver sent the message
// again). Sending the record again makes nothing twice as long as a
// record ends the lease it is made under: one that committed while its
// answer was lost holds the lease no more, and the next is refused
// (ECONFLICT) with nothing changed. Callers tell that case (again and
// ECONFLICT) from a lease lost during the attempt with
// recordedBeforeTheStoreWasLost.
func recordAgain(ctx context.Context, stop <-chan struct{}, leaseEnds time.Time, record func(ctx context.Context) error) (again bool, err error) {
	wait := recordRetry
	for try := 0; ; try++ {
		tryCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		err = record(tryCtx)
		cancel()
		if arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE || time.Now().Add(wait).After(leaseEnds) {
			return try > 0, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-stop:
			timer.Stop()
			return try > 0, err
		case <-timer.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// recordedBeforeTheStoreWasLost reports whether a record recordAgain sent
// again found its lease gone: most likely an earlier try committed and
// its answer was lost with the store; else the lease ran out meanwhile.
// Either way the store changed nothing, which is logged at info, not as
// a lost attempt.
func recordedBeforeTheStoreWasLost(again bool, err error) bool {
	return again && arbiter.ErrorCode(err) == arbiter.ECONFLICT
}
