package dbtest

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// ErrUnreachable is what a store answers while its database cannot be
// reached: a primary lost and its standby not yet promoted.
var ErrUnreachable = arbiter.Errorf(arbiter.EUNAVAILABLE, "The database cannot be reached; try again shortly.")

// RecordLoss is a way a store is lost while a worker records an attempt
// (a verifier's call, a delivery), for tests of a store wrapper whose
// record method goes through LostRecords.Record.
type RecordLoss struct {
	Name string
	// Failing is how many records fail first.
	Failing int32
	// AnswersLost says each failing record is made in the database and
	// its answer lost (a commit whose acknowledgement the failover took),
	// rather than refused before it reaches the database.
	AnswersLost bool
}

// RecordLosses are the ways a test runs: three records refused, then
// one accepted; one accepted with its answer lost, then the one sent
// again refused as its lease is gone.
var RecordLosses = []RecordLoss{
	{Name: "Refused", Failing: 3},
	{Name: "AnswerLost", Failing: 1, AnswersLost: true},
}

// Records returns the LostRecords of the way.
func (c RecordLoss) Records() *LostRecords {
	l := &LostRecords{answersLost: c.AnswersLost}
	l.failing.Store(c.Failing)
	return l
}

// Reached is how many records reach the database when the worker sends
// each again until one is answered.
func (c RecordLoss) Reached() int {
	if c.AnswersLost {
		return 2
	}
	return 1
}

// Check fails the test unless the records went as the way says: the
// failing records refused and the next accepted; or the first accepted
// with its answer lost, and the one sent again refused with nothing
// changed (ECONFLICT: the lease was gone).
func (c RecordLoss) Check(t testing.TB, l *LostRecords) {
	t.Helper()
	answers, tries := l.Answers(), l.Tries()
	switch {
	case !c.AnswersLost && (tries != int(c.Failing)+1 || len(answers) != 1 || answers[0] != nil):
		t.Errorf("%d records, the database answering %v; want %d refused, then one accepted", tries, answers, c.Failing)
	case c.AnswersLost && (tries != 2 || len(answers) != 2 || answers[0] != nil || arbiter.ErrorCode(answers[1]) != arbiter.ECONFLICT):
		t.Errorf("%d records, the database answering %v; want one accepted with its answer lost, then one refused as its lease was gone",
			tries, answers)
	}
}

// LostRecords makes a store's first records of attempts fail as a store
// that cannot be reached does (ErrUnreachable), as its RecordLoss says.
type LostRecords struct {
	failing     atomic.Int32 // records still to fail
	answersLost bool
	tries       atomic.Int32

	mu      sync.Mutex
	reached []error // what the database answered each record that reached it
}

// Record counts a record and reports whether it fails as unreachable;
// write makes it in the database unless it is refused before.
func (l *LostRecords) Record(write func() error) (unreachable bool) {
	l.tries.Add(1)
	failing := l.failing.Add(-1) >= 0
	if failing && !l.answersLost {
		return true
	}
	err := write()
	l.mu.Lock()
	l.reached = append(l.reached, err)
	l.mu.Unlock()
	return failing
}

// Tries returns how many records were sent.
func (l *LostRecords) Tries() int { return int(l.tries.Load()) }

// Answers returns what the database answered the records that reached
// it, in order.
func (l *LostRecords) Answers() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reached)
}
