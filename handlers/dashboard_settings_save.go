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
		if form.GoldPercent != "" {
			typed.GoldPercent = form.GoldPercent
		}
		err = saveSettings(r, accounts, accountID, form)
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			typed.Error, typed.ErrorField = arbiter.ErrorMessage(err), arbiter.ErrorField(err)
			Render(w, r, http.StatusBadRequest, dashboard.Settings(PageOf(r, "Settings", "settings"), typed))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		typed.Saved = true
		typed.ReservationMinutes, typed.NotifyMinutes = strings.TrimSpace(typed.ReservationMinutes), strings.TrimSpace(typed.NotifyMinutes)
		typed.GoldPercent = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(typed.GoldPercent), "%"))
		Render(w, r, http.StatusOK, dashboard.Settings(PageOf(r, "Settings", "settings"), typed))
	})
}

// saveSettings saves what the settings form asks for, every value checked
// before any is saved.
func saveSettings(r *http.Request, accounts arbiter.AccountService, accountID string, form settingsForm) error {
	reserve, notify, err := form.durations()
	if err != nil {
		return err
	}
	// A form without the gold rate (an older page) leaves it as it is.
	var gold *float64
	if form.GoldPercent != "" {
		rate, err := arbiter.ParseGoldPercent(form.GoldPercent)
		if err != nil {
			return inFormField("gold_percent", err)
		}
		gold = &rate
	}
	if err := accounts.SetReservationLength(r.Context(), accountID, reserve, ActorOf(r)); err != nil {
		return err
	}
	if err := accounts.SetNotifyAfter(r.Context(), accountID, notify, ActorOf(r)); err != nil {
		return err
	}
	if gold == nil {
		return nil
	}
	return accounts.SetGoldRate(r.Context(), accountID, *gold, ActorOf(r))
}
