package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DemoVerdictCreate handles POST /demo/verdicts: it records an anonymous
// verdict on a demo task and answers the stored record. The task never
// changes. Each client IP spends one request of limit, which it shares with
// the demo desk's form; an empty bucket is 429 with Retry-After.
func DemoVerdictCreate(demo arbiter.DemoService, limit arbiter.RateLimit) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := allowClient(r, limit, errTooManyDemoVerdicts); err != nil {
			Error(w, r, err)
			return
		}
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

// errTooManyDemoVerdicts is what a client over the demo's limit is told.
const errTooManyDemoVerdicts = "Too many demo verdicts from your address. Wait a moment, then try again."
