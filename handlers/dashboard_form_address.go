package handlers

import (
	"net/http"
	"strings"
)

// DashboardFormAddress handles GET on an address a dashboard form posts
// to: it leads (303) to the page that holds the form, page with "{id}"
// standing for the path's id. A refused form is answered at the address
// it posted to; reached again later (from the history, a bookmark, or by
// Back and Forward) that address shows the form instead of a 405.
func DashboardFormAddress(page string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirect(w, r, strings.ReplaceAll(page, "{id}", r.PathValue("id")))
	})
}
