package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardKeyCreate handles POST /keys: it creates a key with the name and
// answers the keys page with the plaintext, shown this once and never
// stored. htmx gets the keys section alone. The audit log records the
// creation with the key, in one step.
func DashboardKeyCreate(keys arbiter.APIKeyService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		accountID := arbiter.AccountIDFromContext(ctx)
		render := func(status int, v dashboard.KeysView) {
			list, err := keys.ListAPIKeys(ctx, accountID)
			if err != nil {
				Error(w, r, err)
				return
			}
			v.Keys, v.Now = list, now()
			if IsHTMX(r) {
				Render(w, r, status, dashboard.KeysSection(v))
				return
			}
			Render(w, r, status, dashboard.Keys(PageOf(r, "API keys", "keys"), v))
		}

		name := r.PostFormValue("name")
		k, plaintext, err := keys.CreateAPIKey(ctx, accountID, name, ActorOf(r))
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			render(http.StatusBadRequest, dashboard.KeysView{Name: name, Error: arbiter.ErrorMessage(err)})
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		render(http.StatusOK, dashboard.KeysView{Created: &dashboard.CreatedKey{Key: k, Plaintext: plaintext}})
	})
}
