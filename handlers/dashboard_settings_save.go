package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardSettingsSave handles POST /settings. A refused value answers
// the page with it as typed and why, changing nothing.
func DashboardSettingsSave(accounts arbiter.AccountService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, accountID := r.Context(), arbiter.AccountIDFromContext(r.Context())
		typed, err := settingsView(r, accounts)
		if err != nil {
			Error(w, r, err)
			return
		}
		typed.ReservationMinutes, typed.NotifyMinutes = r.PostFormValue("reservation_minutes"), r.PostFormValue("notify_minutes")
		reserve, err := minutesOf(typed.ReservationMinutes, errReservationMinutes)
		var notify *time.Duration
		if err == nil && strings.TrimSpace(typed.NotifyMinutes) != "" {
			var n time.Duration
			n, err = minutesOf(typed.NotifyMinutes, errNotifyMinutes)
			notify = &n
		}
		// Both values are checked before either is saved.
		if err == nil {
			err = arbiter.CheckReservation(reserve)
		}
		if err == nil && notify != nil {
			err = arbiter.CheckNotifyAfter(*notify)
		}
		if err == nil {
			err = accounts.SetReservationLength(ctx, accountID, reserve, ActorOf(r))
		}
		if err == nil {
			err = accounts.SetNotifyAfter(ctx, accountID, notify, ActorOf(r))
		}
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			typed.Error = arbiter.ErrorMessage(err)
			Render(w, r, http.StatusBadRequest, dashboard.Settings(PageOf(r, "Settings", "settings"), typed))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		typed.Saved = true
		typed.ReservationMinutes, typed.NotifyMinutes = strings.TrimSpace(typed.ReservationMinutes), strings.TrimSpace(typed.NotifyMinutes)
		Render(w, r, http.StatusOK, dashboard.Settings(PageOf(r, "Settings", "settings"), typed))
	})
}

// minutesOf reads a whole number of minutes, from 1 to a day's; refused
// is the answer for anything else.
func minutesOf(typed string, refused error) (time.Duration, error) {
	n, err := strconv.Atoi(strings.TrimSpace(typed))
	if err != nil || n < 1 || n > 24*60 {
		return 0, refused
	}
	return time.Duration(n) * time.Minute, nil
}

// errNotifyMinutes refuses a wait before mailing reviewers that is not a
// number of minutes.
var errNotifyMinutes = arbiter.CheckNotifyAfter(0)

// errReservationMinutes refuses a reservation length that is not a number
// of minutes the store may hold.
var errReservationMinutes = arbiter.Errorf(arbiter.EINVALID, "A reservation lasts from %d to %d whole minutes.",
	int(arbiter.MinReservation.Minutes()), int(arbiter.MaxReservation.Minutes()))
