package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DemoVerdictCreate handles POST /demo/verdicts: it records an anonymous
// verdict on a demo task and answers the stored record. The task never changes.
func DemoVerdictCreate(demo arbiter.DemoService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		in, err := arbiter.ParseDemoVerdictCreate(body)
		if err != nil {
			Error(w, r, err)
			return
		}
		v, err := demo.CreateDemoVerdict(r.Context(), in)
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, v)
	})
}
