package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

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
