package handlers

import (
	"net/http"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardSettingsSave handles POST /settings. A refused value answers
// the page with it as typed and why, changing nothing.
func DashboardSettingsSave(accounts arbiter.AccountService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accountID := arbiter.AccountIDFromContext(r.Context())
		typed, err := settingsView(r, accounts)
		if err != nil {
			Error(w, r, err)
			return
		}
		form := readSettingsForm(r)
		typed.ReservationMinutes, typed.NotifyMinutes = form.ReservationMinutes, form.NotifyMinutes
		err = saveSettings(r, accounts, accountID, form)
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

// saveSettings saves what the settings form asks for, both values checked
// before either is saved.
func saveSettings(r *http.Request, accounts arbiter.AccountService, accountID string, form settingsForm) error {
	reserve, notify, err := form.durations()
	if err != nil {
		return err
	}
	if err := accounts.SetReservationLength(r.Context(), accountID, reserve, ActorOf(r)); err != nil {
		return err
	}
	return accounts.SetNotifyAfter(r.Context(), accountID, notify, ActorOf(r))
}
