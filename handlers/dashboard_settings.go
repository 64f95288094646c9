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
	v := dashboard.SettingsView{AccountName: a.Email, ReservationMinutes: strconv.Itoa(int(a.ReservationLength.Minutes()))}
	if a.NotifyAfter != nil {
		v.NotifyMinutes = strconv.Itoa(int(a.NotifyAfter.Minutes()))
	}
	if s := arbiter.SessionFromContext(r.Context()); s != nil {
		v.CanDelete = arbiter.Can(s.Role, arbiter.ActionDeleteAccount)
	}
	return v, nil
}

// DashboardAccountDelete handles POST /settings/delete: an owner deletes
// the account after typing its name. A wrong name answers the settings
// page saying so, changing nothing; a deletion sends the person to
// /account/deleted.
func DashboardAccountDelete(accounts arbiter.AccountService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, accountID := r.Context(), arbiter.AccountIDFromContext(r.Context())
		err := accounts.DeleteAccount(ctx, accountID, r.PostFormValue("confirm"), ActorOf(r))
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			v, findErr := settingsView(r, accounts)
			if findErr != nil {
				Error(w, r, findErr)
				return
			}
			v.DeleteError = arbiter.ErrorMessage(err)
			Render(w, r, http.StatusBadRequest, dashboard.Settings(PageOf(r, "Settings", "settings"), v))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		LoggerFromContext(ctx).Info("account deleted", "account_id", accountID, "by", ActorOf(r).PersonID)
		redirect(w, r, "/account/deleted")
	})
}

// DashboardAccountDeleted handles GET /account/deleted: the deletion is
// confirmed, and the person learns which account their session moved to,
// or that their next sign-in starts a new one.
func DashboardAccountDeleted() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v dashboard.AccountDeletedView
		if s := arbiter.SessionFromContext(r.Context()); s != nil && s.AccountID != "" {
			v.NextAccount = s.AccountName
		}
		Render(w, r, http.StatusOK, dashboard.AccountDeleted(PageOf(r, "Account deleted", ""), v))
	})
}

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
