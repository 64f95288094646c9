package arbiter

import (
	"context"
	"time"
)

// Reservations on the desk: opening a task of the queue reserves it for
// that reviewer, so two reviewers never work on the same task. A
// reservation is a lease like the worker's, its expiry computed by the
// database's clock; the page that holds it extends it while it is open.
const (
	// DefaultReservation is how long a reservation lasts unless the
	// account sets its own.
	DefaultReservation = 10 * time.Minute
	// MinReservation and MaxReservation bound an account's setting.
	MinReservation = time.Minute
	MaxReservation = 2 * time.Hour
	// ReservationRefresh is how often an open desk extends its
	// reservation: well within the shortest reservation.
	ReservationRefresh = time.Minute
)

// CheckReservation returns EINVALID unless d is a reservation length an
// account may set: whole minutes from MinReservation to MaxReservation.
func CheckReservation(d time.Duration) error {
	if d < MinReservation || d > MaxReservation || d%time.Minute != 0 {
		return Errorf(EINVALID, "A reservation lasts from %d to %d whole minutes.", int(MinReservation.Minutes()), int(MaxReservation.Minutes()))
	}
	return nil
}

// Reservation is who holds a task waiting for a human, and until when.
type Reservation struct {
	TaskID   string
	PersonID string
	Email    string // the holder's
	Until    Timestamp
}

// HeldByOther reports whether someone other than the person holds the
// reservation; a reservation that has run out by now is held by nobody.
func (r *Reservation) HeldByOther(personID string, now Timestamp) bool {
	return r != nil && r.PersonID != personID && r.Until > now
}

// ReservedByOtherError is the answer to a decision on a task someone else
// holds: the reviewer's own reservation ran out and another took the task
// over, or they never held it.
func ReservedByOtherError(r *Reservation) error {
	return Errorf(ECONFLICT, "%s is working on this task now (reserved until %s UTC), so your verdict was not recorded. Pick another task.",
		r.Email, r.Until.Time().UTC().Format("15:04"))
}

// ReservationService keeps the desk's reservations. Every call takes the
// reviewer's person id and checks that their role in the account may
// review (Can), returning ErrNotAllowed otherwise.
type ReservationService interface {
	// ReserveTask reserves the account's task for the person, or extends
	// their reservation, for the account's reservation length from now
	// (the database's clock), unless someone else holds it. It returns the
	// reservation as it stands: the person's, or the other holder's (see
	// HeldByOther). A task not in the review queue (waiting for a human or
	// for its audit) has no reservation (nil). Returns ENOTFOUND as
	// FindTaskByID does.
	ReserveTask(ctx context.Context, accountID, taskID, personID string) (*Reservation, error)

	// ReleaseTask ends the person's reservation of the task, if they hold
	// it, and when skip is set puts the task at the end of the session's
	// order for NextTask.
	ReleaseTask(ctx context.Context, accountID, taskID, personID, sessionID string, skip bool) error

	// NextTask reserves the view's first task (its filters, in its order)
	// that nobody else holds, those the session skipped last, in the order
	// they were skipped, and returns the person's reservation of it (its
	// TaskID names the task); nil when there is none. Two reviewers asking
	// at the same moment get different tasks. Returns EINVALID for a view
	// that fails Validate.
	NextTask(ctx context.Context, accountID, personID, sessionID string, view QueueView) (*Reservation, error)
}
