package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardSettings handles GET /settings: the account's settings.
func DashboardSettings(accounts arbiter.AccountService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := accounts.FindAccountByID(r.Context(), arbiter.AccountIDFromContext(r.Context()))
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Settings(PageOf(r, "Settings", "settings"), dashboard.SettingsView{
			ReservationMinutes: strconv.Itoa(int(a.ReservationLength.Minutes())),
		}))
	})
}

// DashboardSettingsSave handles POST /settings. A refused value answers
// the page with it as typed and why, changing nothing.
func DashboardSettingsSave(accounts arbiter.AccountService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		typed := r.PostFormValue("reservation_minutes")
		var err error = errReservationMinutes
		if n, convErr := strconv.Atoi(strings.TrimSpace(typed)); convErr == nil && n > 0 && n <= int(arbiter.MaxReservation.Minutes()) {
			err = accounts.SetReservationLength(r.Context(), arbiter.AccountIDFromContext(r.Context()), time.Duration(n)*time.Minute, ActorOf(r))
		}
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			Render(w, r, http.StatusBadRequest, dashboard.Settings(PageOf(r, "Settings", "settings"), dashboard.SettingsView{
				ReservationMinutes: typed, Error: arbiter.ErrorMessage(err),
			}))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Settings(PageOf(r, "Settings", "settings"), dashboard.SettingsView{
			ReservationMinutes: strings.TrimSpace(typed), Saved: true,
		}))
	})
}

// errReservationMinutes refuses a reservation length that is not a number
// of minutes the store may hold.
var errReservationMinutes = arbiter.Errorf(arbiter.EINVALID, "A reservation lasts from %d to %d whole minutes.",
	int(arbiter.MinReservation.Minutes()), int(arbiter.MaxReservation.Minutes()))
