package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDemo_SaysWhatArbiterIsAndLeadsBack: the demo's first task and its
// calibration report, which visitors reach without an account, say what
// Arbiter is and link back to the start.
func TestDemo_SaysWhatArbiterIsAndLeadsBack(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		visitor := d.browser()
		for _, path := range []string{"/review/demo", "/review/demo/calibration"} {
			r := visitor.follow(visitor.get(path))
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, "Arbiter asks an automated verifier first") || !strings.Contains(r.body, `href="/review"`) {
				t.Errorf("%s does not say what Arbiter is or lead back:\n%.3000s", path, r.body)
			}
		}
	})
}
