package handlers

import "net/http"

// AuthSignOut handles POST /signout: it ends the session in the store and
// clears the cookie, so a copy of the cookie no longer works either.
func AuthSignOut(sessions SessionKeeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.SignOut(w, r); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/signin")
	})
}
