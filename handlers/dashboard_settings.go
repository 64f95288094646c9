package handlers

import (
	"net/http"
	"strconv"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardSettings handles GET /settings: the account's settings.
func DashboardSettings(accounts arbiter.AccountService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := settingsView(r, accounts)
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Settings(PageOf(r, "Settings", "settings"), v))
	})
}

// settingsView returns the settings page of the request's account as
// stored: its name, its settings, and whether this person may delete it.
func settingsView(r *http.Request, accounts arbiter.AccountService) (dashboard.SettingsView, error) {
	a, err := accounts.FindAccountByID(r.Context(), arbiter.AccountIDFromContext(r.Context()))
	if err != nil {
		return dashboard.SettingsView{}, err
	}
	v := dashboard.SettingsView{AccountName: a.Email, ReservationMinutes: strconv.Itoa(int(a.ReservationLength.Minutes())),
		GoldPercent: strconv.FormatFloat(a.GoldRate*100, 'f', -1, 64)}
	if a.NotifyAfter != nil {
		v.NotifyMinutes = strconv.Itoa(int(a.NotifyAfter.Minutes()))
	}
	if s := arbiter.SessionFromContext(r.Context()); s != nil {
		v.CanDelete = arbiter.Can(s.Role, arbiter.ActionDeleteAccount)
	}
	return v, nil
}
