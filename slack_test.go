package arbiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestSlackConnectionInput_Validate(t *testing.T) {
	const secret = "0123456789abcdef0123"
	for _, tc := range []struct {
		name string
		in   arbiter.SlackConnectionInput
		ok   bool
	}{
		{"HTTP", arbiter.SlackConnectionInput{Mode: "http", BotToken: "xoxb-1", SigningSecret: secret, DefaultChannel: "#refunds"}, true},
		{"Socket", arbiter.SlackConnectionInput{Mode: "socket", BotToken: "xoxb-1", AppToken: "xapp-1", DefaultChannel: "C0123456"}, true},
		{"NoMode", arbiter.SlackConnectionInput{BotToken: "xoxb-1", SigningSecret: secret, DefaultChannel: "#a"}, false},
		{"UserToken", arbiter.SlackConnectionInput{Mode: "http", BotToken: "xoxp-1", SigningSecret: secret, DefaultChannel: "#a"}, false},
		{"HTTPWithoutSecret", arbiter.SlackConnectionInput{Mode: "http", BotToken: "xoxb-1", DefaultChannel: "#a"}, false},
		{"SocketWithoutAppToken", arbiter.SlackConnectionInput{Mode: "socket", BotToken: "xoxb-1", SigningSecret: secret, DefaultChannel: "#a"}, false},
		{"ChannelWithoutHash", arbiter.SlackConnectionInput{Mode: "http", BotToken: "xoxb-1", SigningSecret: secret, DefaultChannel: "refunds"}, false},
		{"UpperCaseChannel", arbiter.SlackConnectionInput{Mode: "http", BotToken: "xoxb-1", SigningSecret: secret, DefaultChannel: "#Refunds"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			err := in.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
			if err != nil && (arbiter.ErrorCode(err) != arbiter.EINVALID || strings.Contains(err.Error(), "xoxb-1")) {
				t.Errorf("error %v: want EINVALID that echoes no token", err)
			}
		})
	}
}

func TestNextSlackAttempt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int
		r        arbiter.SlackResult
		status   string
		counted  int
		delay    time.Duration
	}{
		{"Sent", 0, arbiter.SlackResult{Sent: true}, arbiter.SlackSent, 1, 0},
		{"Skipped", 2, arbiter.SlackResult{Skipped: true}, arbiter.SlackSkipped, 2, 0},
		{"RateLimitedCountsNothing", 3, arbiter.SlackResult{RetryAfter: 30 * time.Second, Error: "429"}, arbiter.SlackPending, 3, 30 * time.Second},
		{"DeferredCountsNothing", 0, arbiter.SlackResult{Defer: 400 * time.Millisecond}, arbiter.SlackPending, 0, 400 * time.Millisecond},
		{"FailureBacksOff", 2, arbiter.SlackResult{Error: "timeout"}, arbiter.SlackPending, 3, 4 * time.Second},
		{"PermanentFails", 0, arbiter.SlackResult{Error: "channel_not_found", Permanent: true}, arbiter.SlackFailed, 1, 0},
		{"LastAttemptFails", arbiter.MaxSlackAttempts - 1, arbiter.SlackResult{Error: "timeout"}, arbiter.SlackFailed, arbiter.MaxSlackAttempts, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, counted, delay := arbiter.NextSlackAttempt(tc.attempts, tc.r)
			if status != tc.status || counted != tc.counted || delay != tc.delay {
				t.Errorf("= %s, %d, %v; want %s, %d, %v", status, counted, delay, tc.status, tc.counted, tc.delay)
			}
		})
	}
}

// TestSlackPostSettled: a post's unrecorded attempt is looked for until
// the post is sent, skipped or given up, or an attempt learnt that it is
// not in Slack; a failure of unknown outcome (a timeout) or a lookup
// that could not finish keeps it.
func TestSlackPostSettled(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    arbiter.SlackResult
		want bool
	}{
		{"Sent", arbiter.SlackResult{Sent: true, TS: "1.2"}, true},
		{"Recovered", arbiter.SlackResult{Sent: true, Recovered: true, TS: "1.2"}, true},
		{"Skipped", arbiter.SlackResult{Skipped: true}, true},
		{"Permanent", arbiter.SlackResult{Error: "not_in_channel", Permanent: true}, true},
		{"RefusedByRateLimit", arbiter.SlackResult{Error: "429", RetryAfter: time.Second, Unposted: true}, true},
		{"TimedOut", arbiter.SlackResult{Error: "context deadline exceeded"}, false},
		{"LookupRateLimited", arbiter.SlackResult{Error: "429", RetryAfter: time.Second}, false},
		{"Deferred", arbiter.SlackResult{Defer: time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, _ := arbiter.NextSlackAttempt(0, tc.r)
			if got := arbiter.SlackPostSettled(status, tc.r); got != tc.want {
				t.Errorf("SlackPostSettled(%s, %+v) = %v, want %v", status, tc.r, got, tc.want)
			}
		})
	}
}

func TestParseTaskCreate_Notify(t *testing.T) {
	base := `{"prompt":"p","allowed_verdicts":["a","b"]`
	for _, tc := range []struct {
		name, notify string
		want         []string
	}{
		{"Channel", `["slack:#refunds"]`, []string{"slack:#refunds"}},
		{"ChannelID", `["slack:C0123456"]`, []string{"slack:C0123456"}},
		{"TwiceCountsOnce", `["slack:#a","slack:#b","slack:#a"]`, []string{"slack:#a", "slack:#b"}},
		{"Empty", `[]`, nil},
		{"NotSlack", `["email:x@example.com"]`, nil},
		{"NoHash", `["slack:refunds"]`, nil},
		{"UpperCase", `["slack:#Refunds"]`, nil},
		{"TooMany", `["slack:#a","slack:#b","slack:#c","slack:#d","slack:#e","slack:#f"]`, nil},
		{"NullItem", `[null]`, nil},
		{"NotAnArray", `"slack:#a"`, nil},
		{"Null", `null`, nil},
		{"TeamsChannel", `["teams:finance/approvals"]`, []string{"teams:finance/approvals"}},
		{"TeamsPersonal", `["teams:@ann@example.com","slack:#a"]`, []string{"teams:@ann@example.com", "slack:#a"}},
		{"TeamsUpperCase", `["teams:Finance/Approvals"]`, nil},
		{"TeamsEmpty", `["teams:"]`, nil},
		{"TeamsSpace", `["teams:finance approvals"]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := arbiter.ParseTaskCreate([]byte(base + `,"notify":` + tc.notify + `}`))
			if tc.want == nil {
				if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(err.Error(), "notify") {
					t.Fatalf("err = %v, want EINVALID naming notify", err)
				}
				return
			}
			if err != nil || strings.Join(in.Notify, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("Notify = %v, %v; want %v", in.Notify, err, tc.want)
			}
		})
	}
	without, _ := arbiter.ParseTaskCreate([]byte(base + `}`))
	with, _ := arbiter.ParseTaskCreate([]byte(base + `,"notify":["slack:#a"]}`))
	if without.Fingerprint() == with.Fingerprint() {
		t.Error("notify does not take part in the fingerprint")
	}
}
