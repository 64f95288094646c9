package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter/views/dashboard"
)

// PageReviewSoon handles GET /review/ until the reviewer site is built: it
// holds the place the navigation links to.
func PageReviewSoon() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Render(w, r, http.StatusOK, dashboard.ReviewSoon(PageOf(r, "Review queue", "review")))
	})
}
