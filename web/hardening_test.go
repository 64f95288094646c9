package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/web"
)

func TestHealthz_HEADAnswersAsGETDoes(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		for _, beat := range []bool{false, true} {
			if beat {
				if err := a.store.Heartbeat(ctx, "wrk_test"); err != nil {
					t.Fatal(err)
				}
			}
			get, _, _ := a.do("GET", "/healthz", "", "")
			head, h, body := a.do("HEAD", "/healthz", "", "")
			if head != get || len(body) != 0 {
				t.Fatalf("HEAD /healthz = %d with %d bytes, want GET's %d and no body", head, len(body), get)
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Errorf("HEAD /healthz Cache-Control = %q", h.Get("Cache-Control"))
			}
		}
		if status, _, _ := a.do("HEAD", "/healthz", "", ""); status != http.StatusOK {
			t.Fatalf("HEAD /healthz with a fresh heartbeat = %d, want 200", status)
		}
	})
}

func TestSecurityHeaders_HSTSWhenTheAppIsHTTPS(t *testing.T) {
	t.Parallel()
	store := dbtest.Open(t, db.SQLite, db.Options{})
	for _, tc := range []struct {
		origin string
		want   bool
	}{{"https://arbiter.example.com", true}, {"http://arbiter.example.com", false}} {
		router := &web.Router{
			Services:   web.Services{Tasks: store, Keys: store, Demo: store, Health: store},
			KeyChecker: web.NewKeyChecker(store, nil), Logger: discardLogger(),
			Site: handlers.Site{BaseURL: tc.origin, AppURL: tc.origin, ReviewURL: tc.origin},
		}
		h := router.Routes()
		for _, path := range []string{"/healthz", "/v1/openapi.json", "/nowhere"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tc.origin+path, nil))
			got := rec.Header().Get("Strict-Transport-Security")
			if tc.want && !strings.HasPrefix(got, "max-age=") {
				t.Errorf("%s%s: Strict-Transport-Security = %q, want a max-age", tc.origin, path, got)
			} else if !tc.want && got != "" {
				t.Errorf("%s%s: Strict-Transport-Security = %q on an http app", tc.origin, path, got)
			}
		}
	}
}

func TestForms_InvalidUTF8Is400AndChangesNothing(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "Refund?", "")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")
		demo, _ := d.store.ListDemoTasks(ctx)
		visitor := d.browser()

		for _, tc := range []struct {
			name string
			b    *browser
			path string
			form url.Values
		}{
			{"KeyName", alice, "/keys", url.Values{"name": {"caf\xe9"}}},
			{"SignInEmail", visitor, "/signin/email", url.Values{"email": {"b@example.com"}, "next": {"/\xff"}}},
			{"ReviewRationale", alice, "/review/tasks/" + task.ID, url.Values{"verdict": {"approve"}, "rationale": {"\xff\xfe"}}},
			{"DemoRationale", visitor, "/review/demo/tasks/" + demo[0].ID, url.Values{"verdict": {demo[0].AllowedVerdicts[0]}, "rationale": {"\xc3"}}},
			{"FieldName", visitor, "/review/demo/tasks/" + demo[0].ID, url.Values{"verdict": {demo[0].AllowedVerdicts[0]}, "\xff": {"x"}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := tc.b.post(tc.path, tc.form)
				wantStatus(t, r, http.StatusBadRequest)
				if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(r.body, "valid UTF-8") {
					t.Errorf("not a page that says why:\n%.1500s", r.body)
				}
			})
		}
		if keys, err := d.store.ListAPIKeys(ctx, acct.ID); err != nil || len(keys) != 0 {
			t.Errorf("keys after refused forms = %d, %v", len(keys), err)
		}
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Error("a refused form decided the task")
		}
		select {
		case m := <-d.mail.messages:
			t.Errorf("a refused form sent mail to %s", m.to)
		default:
		}
		// A query string is a form too.
		wantStatus(t, visitor.get("/signin?next=%ff"), http.StatusBadRequest)
	})
}
