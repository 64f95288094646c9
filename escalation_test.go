package arbiter_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestParseAlertWait(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the wait written back; "" when refused
	}{
		{"15m", "15m"},
		{"1h", "1h"},
		{"90m", "1h30m"},
		{"1h30m", "1h30m"},
		{"2d", "2d"},
		{"1d12h", "1d12h"},
		{"60s", "1m"},
		{"30d", "30d"},
		{"50%", "50%"},
		{"1%", "1%"},
		{"99%", "99%"},
		{"59s", ""},
		{"31d", ""},
		{"0m", ""},
		{"", ""},
		{"15", ""},
		{"1.5h", ""},
		{"-1h", ""},
		{"1m1h", ""},
		{"0%", ""},
		{"100%", ""},
		{"050%", ""},
		{"12.5%", ""},
		{"%", ""},
		{"99999999999h", ""},
	} {
		w, err := arbiter.ParseAlertWait("reminders", tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: took %v, want refused", tc.in, w)
		case tc.want == "" && (arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), "reminders")):
			t.Errorf("%q: %v, want EINVALID naming the field", tc.in, err)
		case tc.want != "" && (err != nil || w.String() != tc.want):
			t.Errorf("%q: %v (%v), want %s", tc.in, w, err, tc.want)
		}
	}
}

func TestParseReminders(t *testing.T) {
	s := func(v ...string) []*string {
		out := make([]*string, len(v))
		for i := range v {
			out[i] = &v[i]
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []*string
		want string // the reminders written back, or the error's words
	}{
		{"none", s(), "[]"},
		{"sorted, durations first", s("90%", "1h", "15m", "50%"), `["15m","1h","50%","90%"]`},
		{"the same wait twice", s("60m", "1h"), "twice"},
		{"too many", s("1m", "2m", "3m", "4m", "5m", "6m"), "at most 5"},
		{"a null", []*string{nil}, "not null"},
		{"not a wait", s("soon"), "not a wait"},
	} {
		got, err := arbiter.ParseReminders(tc.in)
		checkParsed(t, tc.name, got, err, tc.want)
	}
}

func TestParseEscalation(t *testing.T) {
	rung := func(after, to string) *arbiter.RungRequest { return &arbiter.RungRequest{After: &after, To: &to} }
	for _, tc := range []struct {
		name string
		in   []*arbiter.RungRequest
		want string // the rungs written back, or the error's words
	}{
		{"a role and an address", []*arbiter.RungRequest{rung("30m", "role:admin"), rung("2h", "email:Lead@Example.com")},
			`[{"after":"30m","to":"role:admin"},{"after":"2h","to":"email:lead@example.com"}]`},
		{"shares of the deadline", []*arbiter.RungRequest{rung("50%", "role:admin"), rung("90%", "role:owner")},
			`[{"after":"50%","to":"role:admin"},{"after":"90%","to":"role:owner"}]`},
		{"not later than the one before", []*arbiter.RungRequest{rung("2h", "role:admin"), rung("120m", "role:owner")}, "must wait longer"},
		{"durations and shares mixed", []*arbiter.RungRequest{rung("30m", "role:admin"), rung("90%", "role:owner")}, "not both"},
		{"an unknown role", []*arbiter.RungRequest{rung("30m", "role:boss")}, "names no role"},
		{"neither role nor email", []*arbiter.RungRequest{rung("30m", "slack:#ops")}, `"role:<role>" or "email:<address>"`},
		{"an address without a dot", []*arbiter.RungRequest{rung("30m", "email:root@localhost")}, "full domain name"},
		{"an address by IP", []*arbiter.RungRequest{rung("30m", "email:x@[10.0.0.5]")}, "IP address"},
		{"the demo account", []*arbiter.RungRequest{rung("30m", "email:"+arbiter.DemoAccountEmail)}, "demo"},
		{"no after", []*arbiter.RungRequest{{To: ref("role:admin")}}, "needs after"},
		{"a null rung", []*arbiter.RungRequest{nil}, "needs after"},
		{"too many", []*arbiter.RungRequest{rung("1m", "role:admin"), rung("2m", "role:admin"), rung("3m", "role:admin"),
			rung("4m", "role:admin"), rung("5m", "role:admin"), rung("6m", "role:admin")}, "at most 5"},
	} {
		got, err := arbiter.ParseEscalation(tc.in)
		checkParsed(t, tc.name, got, err, tc.want)
	}
}

// checkParsed checks what a parse of the case name gave: its JSON written
// back is want, or its EINVALID error's sentence has the words want.
func checkParsed(t *testing.T, name string, got any, err error, want string) {
	t.Helper()
	if err != nil {
		if !strings.Contains(arbiter.ErrorMessage(err), want) || arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
		return
	}
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("%s: %s, want %s", name, b, want)
	}
}

func TestNextAlert(t *testing.T) {
	const human = arbiter.Timestamp(1_000_000)
	min := func(n int) arbiter.Timestamp { return arbiter.Timestamp(n) * 60_000 }
	deadline := human + min(100)
	alerts := arbiter.Alerts{
		Reminders:  []arbiter.AlertWait{{After: 15 * time.Minute}, {Percent: 50}},
		Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: 15 * time.Minute}, To: "role:admin"}, {After: arbiter.AlertWait{After: 2 * time.Hour}, To: "role:owner"}},
	}
	say := func(fire *arbiter.AlertStep, next *arbiter.Timestamp) string {
		out := "-"
		if fire != nil {
			out = fmt.Sprintf("fire rung %d at +%dm", fire.Rung, (fire.At-human)/60_000)
		}
		if next != nil {
			out += fmt.Sprintf(", next +%dm", (*next-human)/60_000)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		deadline *arbiter.Timestamp
		fired    int
		now      arbiter.Timestamp
		want     string
	}{
		{"before the first step", &deadline, 0, human + min(15) - 1, "-, next +15m"},
		{"the reminder at its time, before the rung at the same time", &deadline, 0, human + min(15), "fire rung 0 at +15m, next +15m"},
		{"then the rung", &deadline, 1, human + min(15), "fire rung 1 at +15m, next +50m"},
		{"a share of the time to the deadline", &deadline, 2, human + min(50), "fire rung 0 at +50m"},
		{"a rung after the deadline never fires", &deadline, 3, human + min(200), "-"},
		{"late: the next due step only", &deadline, 0, human + min(60), "fire rung 0 at +15m, next +15m"},
		{"without a deadline, shares never come due", nil, 2, human + min(60), "-, next +120m"},
		{"without a deadline, the last rung", nil, 2, human + min(120), "fire rung 2 at +120m"},
		{"all fired", nil, 3, human + min(1000), "-"},
	} {
		if got := say(arbiter.NextAlert(alerts, human, tc.deadline, tc.fired, tc.now)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := alerts.Earliest(human); got != human {
		t.Errorf("with a share, the earliest is the creation: %v", got)
	}
	if got := (arbiter.Alerts{Reminders: []arbiter.AlertWait{{After: time.Hour}}, Escalation: alerts.Escalation}).Earliest(human); got != human+min(15) {
		t.Errorf("the earliest is the shortest wait: %v", got)
	}
}

func TestPolicy_ApplyAlerts(t *testing.T) {
	policy := &arbiter.Policy{TaskType: "refund", DeadlineSeconds: ref(3600), Alerts: arbiter.Alerts{
		Reminders:  []arbiter.AlertWait{{Percent: 50}},
		Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: 30 * time.Minute}, To: "role:admin"}},
	}}
	for _, tc := range []struct {
		name, body string
		want       string // the create's reminders and escalation, or the error's words
	}{
		{"the policy's when left out", `{"prompt":"p","allowed_verdicts":["a"]}`,
			`{"reminders":["50%"],"escalation":[{"after":"30m","to":"role:admin"}]}`},
		{"the create's when given", `{"prompt":"p","allowed_verdicts":["a"],"reminders":["15m"],"escalation":[{"after":"1h","to":"email:lead@example.com"}]}`,
			`{"reminders":["15m"],"escalation":[{"after":"1h","to":"email:lead@example.com"}]}`},
		{"none given: none", `{"prompt":"p","allowed_verdicts":["a"],"reminders":[],"escalation":[]}`, `{}`},
		{"a share with the create's deadline left out takes the policy's", `{"prompt":"p","allowed_verdicts":["a"],"reminders":["90%"]}`,
			`{"reminders":["90%"],"escalation":[{"after":"30m","to":"role:admin"}]}`},
	} {
		in, err := arbiter.ParseTaskCreate([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := policy.Apply(in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if b, _ := json.Marshal(got.Alerts); string(b) != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, b, tc.want)
		}
	}
	in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"escalation":[{"after":"50%","to":"role:admin"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var none *arbiter.Policy
	if _, err := none.Apply(in); arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), "escalation") {
		t.Errorf("a share without a deadline: %v", err)
	}
}

func TestParsePolicy_Alerts(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // the policy's JSON holds it, or the error's words
	}{
		{"reminders and rungs", `{"deadline_seconds":3600,"reminders":["1h","15m"],"escalation":[{"after":"30m","to":"role:admin"}]}`,
			`"reminders":["15m","1h"],"escalation":[{"after":"30m","to":"role:admin"}]`},
		{"none", `{}`, `"reminders":[],"escalation":[]`},
		{"null, as any field of a policy", `{"reminders":null,"escalation":null}`, `"reminders":[],"escalation":[]`},
		{"a share without a deadline", `{"reminders":["50%"]}`, "needs deadline_seconds"},
		{"a wrong type", `{"reminders":"15m"}`, "reminders must be an array"},
		{"an unknown field in a rung", `{"escalation":[{"after":"30m","to":"role:admin","by":"x"}]}`, "unknown field"},
		{"a bad target", `{"escalation":[{"after":"30m","to":"admin"}]}`, "role:<role>"},
	} {
		p, err := arbiter.ParsePolicy("refund", []byte(tc.body))
		if err != nil {
			if !strings.Contains(arbiter.ErrorMessage(err), tc.want) || arbiter.ErrorCode(err) != arbiter.EINVALID {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
			continue
		}
		if b, _ := json.Marshal(p); !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, b, tc.want)
		}
	}
}

func TestParseTaskCreate_Alerts(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"prompt":"p","allowed_verdicts":["a"],"reminders":null}`, "not null"},
		{`{"prompt":"p","allowed_verdicts":["a"],"reminders":[1]}`, "reminders must be an array"},
		{`{"prompt":"p","allowed_verdicts":["a"],"escalation":{"after":"1h"}}`, "escalation must be an array"},
		{`{"prompt":"p","allowed_verdicts":["a"],"escalation":[{"after":"1h","to":"role:admin"},{"after":"1h","to":"role:owner"}]}`, "must wait longer"},
	} {
		if _, err := arbiter.ParseTaskCreate([]byte(tc.body)); arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), tc.want) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
	// A create without them keeps its fingerprint.
	a, _ := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"]}`))
	b, _ := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"reminders":["15m"]}`))
	if a.Fingerprint() == b.Fingerprint() || strings.Contains(fmt.Sprint(a.Fingerprint()), "Alerts") {
		t.Errorf("fingerprints %q and %q", a.Fingerprint(), b.Fingerprint())
	}
}

func TestAlertMail(t *testing.T) {
	m := arbiter.AlertMail{Kind: arbiter.AlertEscalation, AccountName: "acme", TaskID: "tsk_1", Prompt: "Refund  order\n42?",
		Waited: 31 * time.Minute, Escalation: &arbiter.TaskEscalation{Rung: 1, To: "role:admin"}, Outcome: "approve at 2026-11-26 14:32 UTC"}
	body := m.Body("https://review.example.com/review")
	for _, want := range []string{"escalated to admins (rung 1)", "“Refund order 42?”", "https://review.example.com/review/tasks/tsk_1",
		"If nobody decides: approve at 2026-11-26 14:32 UTC.", "waited 31m0s"} {
		if !strings.Contains(body, want) {
			t.Errorf("the mail lacks %q:\n%s", want, body)
		}
	}
	if m.Subject() != "Escalated: a task in acme waits for a decision" {
		t.Errorf("subject %q", m.Subject())
	}
}

func TestAlertTargets(t *testing.T) {
	member := func(email, role string) *arbiter.Membership { return &arbiter.Membership{Email: email, Role: role} }
	team := []*arbiter.Membership{member("olga@example.com", arbiter.RoleOwner), member("ada@example.com", arbiter.RoleAdmin), member("rev@example.com", arbiter.RoleReviewer)}
	ownerAndReviewer := []*arbiter.Membership{member("olga@example.com", arbiter.RoleOwner), member("rev@example.com", arbiter.RoleReviewer)}
	ownerAlone := []*arbiter.Membership{member("olga@example.com", arbiter.RoleOwner)}
	rung := func(to string) *arbiter.Rung { return &arbiter.Rung{To: to} }
	for _, tc := range []struct {
		name          string
		rung          *arbiter.Rung
		members       []*arbiter.Membership
		memberAddress bool
		want          []string
	}{
		{"AReminderTellsEveryoneWhoReviews", nil, team, false, []string{"olga@example.com", "ada@example.com", "rev@example.com"}},
		{"AdminsAndOwnersForAdmins", rung("role:admin"), team, false, []string{"olga@example.com", "ada@example.com"}},
		{"OwnersCountAsAdminsWhenThereAreNone", rung("role:admin"), ownerAndReviewer, false, []string{"olga@example.com"}},
		{"ReviewersForReviewers", rung("role:reviewer"), team, false, []string{"rev@example.com"}},
		{"NoReviewersMeansTheAdminsAndOwners", rung("role:reviewer"), ownerAlone, false, []string{"olga@example.com"}},
		{"OwnersForOwners", rung("role:owner"), team, false, []string{"olga@example.com"}},
		{"AMembersAddress", rung("email:ada@example.com"), team, true, []string{"ada@example.com"}},
		{"NobodyOutsideTheAccount", rung("email:lead@example.com"), team, false, nil},
		{"NoMembersNobody", rung("role:admin"), nil, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := arbiter.AlertTargets(tc.rung, tc.members, tc.memberAddress); !slices.Equal(got, tc.want) {
				t.Errorf("AlertTargets = %v, want %v", got, tc.want)
			}
		})
	}
}
