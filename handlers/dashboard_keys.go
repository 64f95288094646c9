package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardKeys handles GET /keys: the create form, the account's keys
// (revoked ones included, for the record) and how to rotate. ?revoked=ID
// confirms a revocation just made.
func DashboardKeys(keys arbiter.APIKeyService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := keys.ListAPIKeys(r.Context(), arbiter.AccountIDFromContext(r.Context()))
		if err != nil {
			Error(w, r, err)
			return
		}
		v := dashboard.KeysView{Keys: list, Now: now()}
		if id := r.URL.Query().Get("revoked"); id != "" {
			for _, k := range list {
				if k.ID == id && !k.Active() {
					v.Revoked = k
				}
			}
		}
		Render(w, r, http.StatusOK, dashboard.Keys(PageOf(r, "API keys", "keys"), v))
	})
}

// findAccountKey returns the account's key with the id, or ENOTFOUND.
func findAccountKey(r *http.Request, keys arbiter.APIKeyService, id string) (*arbiter.APIKey, error) {
	list, err := keys.ListAPIKeys(r.Context(), arbiter.AccountIDFromContext(r.Context()))
	if err != nil {
		return nil, err
	}
	for _, k := range list {
		if k.ID == id {
			return k, nil
		}
	}
	return nil, arbiter.Errorf(arbiter.ENOTFOUND, "There is no such key in this account.")
}
