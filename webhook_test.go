package arbiter_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/arbiterhq/arbiter"
)

func TestNewWebhookSecret_IsWhsecAndBase64Of32Bytes(t *testing.T) {
	a, b := arbiter.NewWebhookSecret(), arbiter.NewWebhookSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	rest, ok := strings.CutPrefix(a, "whsec_")
	key, err := base64.StdEncoding.DecodeString(rest)
	if !ok || err != nil || len(key) != 32 {
		t.Fatalf("%q is not whsec_ and the base64 of 32 bytes", a)
	}
}

// TestSignWebhook_MatchesTheStandardWebhooksLibrary signs with one and two
// secrets; the library verifies each, and signs the same string itself.
func TestSignWebhook_MatchesTheStandardWebhooksLibrary(t *testing.T) {
	s1, s2 := arbiter.NewWebhookSecret(), arbiter.NewWebhookSecret()
	body := []byte(`{"type":"ping","timestamp":"2026-01-01T00:00:00Z","data":{"é":1}}`)
	now := time.Now()
	header := http.Header{}
	header.Set("webhook-id", "msg_0123456789abcdef01234567")
	header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	header.Set("webhook-signature", arbiter.SignWebhook("msg_0123456789abcdef01234567", now.Unix(), body, s1, s2))
	if n := len(strings.Split(header.Get("webhook-signature"), " ")); n != 2 {
		t.Fatalf("%d signatures", n)
	}
	for _, s := range []string{s1, s2} {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, header); err != nil {
			t.Errorf("the library refuses the signature: %v", err)
		}
		want, _ := wh.Sign("msg_0123456789abcdef01234567", now, body)
		if got := arbiter.SignWebhook("msg_0123456789abcdef01234567", now.Unix(), body, s); got != want {
			t.Errorf("signature %s, the library's %s", got, want)
		}
	}
	other, _ := standardwebhooks.NewWebhook(arbiter.NewWebhookSecret())
	if other.Verify(body, header) == nil {
		t.Error("another secret verifies")
	}
}

// TestNextWebhookStep_Schedule walks the whole schedule: after attempts 1
// to 7 the waits are 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, within
// ±10% for any jitter; the 8th failure fails the message.
func TestNextWebhookStep_Schedule(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	failed := arbiter.WebhookAttempt{StatusCode: 500}
	for i, d := range want {
		for _, jitter := range []float64{0, -0.1, 0.1, 0.5, -3} {
			step := arbiter.NextWebhookStep(failed, i+1, true, 0, now, jitter)
			got := step.NextAttemptAt.Time().Sub(now)
			lo, hi := time.Duration(float64(d)*0.9), time.Duration(float64(d)*1.1)
			if step.Status != arbiter.WebhookPending || got < lo-time.Millisecond || got > hi+time.Millisecond {
				t.Errorf("after attempt %d with jitter %v: %s in %v, want pending in %v±10%%", i+1, jitter, step.Status, got, d)
			}
			if jitter == 0 && got != d {
				t.Errorf("after attempt %d without jitter: %v, want %v", i+1, got, d)
			}
		}
	}
	if step := arbiter.NextWebhookStep(failed, len(want)+1, true, 0, now, 0); step.Status != arbiter.WebhookFailed {
		t.Errorf("after the last attempt: %s, want failed", step.Status)
	}
	cases := []struct {
		name       string
		attempt    arbiter.WebhookAttempt
		endpoint   bool
		retryAfter time.Duration
		status     string
		wait       time.Duration
		disable    string
	}{
		{"2xx delivers", arbiter.WebhookAttempt{StatusCode: 204}, true, 0, arbiter.WebhookDelivered, 0, ""},
		{"3xx is a failure", arbiter.WebhookAttempt{StatusCode: 301}, true, 0, arbiter.WebhookPending, 5 * time.Second, ""},
		{"no answer is a failure", arbiter.WebhookAttempt{Error: "timeout"}, true, 0, arbiter.WebhookPending, 5 * time.Second, ""},
		{"410 disables an endpoint", arbiter.WebhookAttempt{StatusCode: 410}, true, 0, arbiter.WebhookFailed, 0, arbiter.WebhookDisabledGone},
		{"410 from a callback is retried", arbiter.WebhookAttempt{StatusCode: 410}, false, 0, arbiter.WebhookPending, 5 * time.Second, ""},
		{"429 Retry-After longer is honoured", arbiter.WebhookAttempt{StatusCode: 429}, true, time.Minute, arbiter.WebhookPending, time.Minute, ""},
		{"503 Retry-After longer is honoured", arbiter.WebhookAttempt{StatusCode: 503}, true, time.Hour, arbiter.WebhookPending, time.Hour, ""},
		{"Retry-After shorter is not", arbiter.WebhookAttempt{StatusCode: 429}, true, time.Second, arbiter.WebhookPending, 5 * time.Second, ""},
		{"Retry-After on a 500 is not", arbiter.WebhookAttempt{StatusCode: 500}, true, time.Hour, arbiter.WebhookPending, 5 * time.Second, ""},
	}
	for _, c := range cases {
		step := arbiter.NextWebhookStep(c.attempt, 1, c.endpoint, c.retryAfter, now, 0)
		if step.Status != c.status || step.DisableEndpoint != c.disable ||
			(c.status == arbiter.WebhookPending && step.NextAttemptAt.Time().Sub(now) != c.wait) {
			t.Errorf("%s: %+v", c.name, step)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"120":                           2 * time.Minute,
		"":                              0,
		"-5":                            0,
		"soon":                          0,
		"999999999999":                  24 * time.Hour,
		"Thu, 01 Jan 2026 00:10:00 GMT": 10 * time.Minute,
		"Wed, 31 Dec 2025 00:10:00 GMT": 0,
	} {
		if got := arbiter.ParseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q = %v, want %v", v, got, want)
		}
	}
}

func TestPublicAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "::1": false, "10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false,
		"169.254.169.254": false, "fe80::1": false, "fd00::1": false, "fc00::1": false, "224.0.0.1": false,
		"ff02::1": false, "0.0.0.0": false, "::": false, "::ffff:127.0.0.1": false, "::ffff:10.1.2.3": false,
		"100.64.0.1": false, "255.255.255.255": false, "0.1.2.3": false,
		"93.184.216.34": true, "2606:4700:4700::1111": true, "8.8.8.8": true, "::ffff:8.8.8.8": true,
	} {
		if got := arbiter.PublicAddress(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PublicAddress(%s) = %v, want %v", addr, got, want)
		}
	}
}

// embeddingForms build the IPv6 forms that carry an IPv4 address, so
// that tests of the address rule and of the dial guard judge each form
// with a private and a public address inside.
var embeddingForms = map[string]func(v4 netip.Addr) netip.Addr{
	"IPv4-compatible ::a.b.c.d": func(v4 netip.Addr) netip.Addr { return embed6("::", 12, v4, false) },
	"IPv4-translated ::ffff:0:a.b.c.d": func(v4 netip.Addr) netip.Addr {
		return embed6("::ffff:0:0:0", 12, v4, false)
	},
	"NAT64 64:ff9b::/96":           func(v4 netip.Addr) netip.Addr { return embed6("64:ff9b::", 12, v4, false) },
	"6to4 2002::/16":               func(v4 netip.Addr) netip.Addr { return embed6("2002::1", 2, v4, false) },
	"Teredo client (inverted)":     func(v4 netip.Addr) netip.Addr { return embed6("2001:0:4136:e378::", 12, v4, true) },
	"Teredo server":                func(v4 netip.Addr) netip.Addr { return embed6("2001::f7f7:f7f7", 4, v4, false) },
	"ISATAP under a public prefix": func(v4 netip.Addr) netip.Addr { return embed6("2606:4700:1:2:0:5efe::", 12, v4, false) },
	"ISATAP, universal bit set":    func(v4 netip.Addr) netip.Addr { return embed6("2606:4700:1:2:200:5efe::", 12, v4, false) },
}

// embed6 writes v4 into the IPv6 address base at byte at, inverted when
// invert (as Teredo writes its client).
func embed6(base string, at int, v4 netip.Addr, invert bool) netip.Addr {
	b, four := netip.MustParseAddr(base).As16(), v4.As4()
	for i, x := range four {
		if invert {
			x ^= 0xff
		}
		b[at+i] = x
	}
	return netip.AddrFrom16(b)
}

// TestPublicAddress_IPv4InsideIPv6: every IPv6 form that carries an IPv4
// address is public only when that address is.
func TestPublicAddress_IPv4InsideIPv6(t *testing.T) {
	private := []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "192.168.1.1", "172.16.0.1", "100.64.0.1", "0.0.0.0", "255.255.255.255"}
	public := []string{"8.8.8.8", "93.184.216.34"}
	for name, form := range embeddingForms {
		for _, list := range [][]string{private, public} {
			for _, s := range list {
				v4 := netip.MustParseAddr(s)
				ip := form(v4)
				if got, want := arbiter.PublicAddress(ip), arbiter.PublicAddress(v4); got != want {
					t.Errorf("%s: PublicAddress(%s) = %v, want %v as for %s", name, ip, got, want, v4)
				}
				url := "https://[" + ip.String() + "]/hooks"
				if _, err := arbiter.ValidateWebhookURL("The URL", url, false); (err == nil) != arbiter.PublicAddress(v4) {
					t.Errorf("%s: ValidateWebhookURL(%s) = %v", name, url, err)
				}
			}
		}
	}
	// A Teredo address is public only when both its server and its
	// client are.
	teredo := func(server, client string) netip.Addr {
		return embed6(embed6("2001::", 4, netip.MustParseAddr(server), false).String(), 12, netip.MustParseAddr(client), true)
	}
	for _, c := range []struct {
		server, client string
		want           bool
	}{
		{"65.54.227.120", "8.8.8.8", true},
		{"65.54.227.120", "192.168.0.1", false},
		{"10.0.0.1", "8.8.8.8", false},
	} {
		if ip := teredo(c.server, c.client); arbiter.PublicAddress(ip) != c.want {
			t.Errorf("Teredo %s (server %s, client %s): want public %v", ip, c.server, c.client, c.want)
		}
	}
	// Addresses written in the forms' own notation read the same.
	for addr, want := range map[string]bool{
		"::127.0.0.1": false, "::10.0.0.1": false, "::ffff:0:127.0.0.1": false, "64:ff9b::127.0.0.1": false,
		"64:ff9b::a9fe:a9fe": false, "2002:7f00:1::": false, "2002:a00:1::1": false,
		"2001:0:4136:e378:8000:63bf:80ff:fffe": false, // client 127.0.0.1
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7": true,  // client 8.8.8.8
		"::8.8.8.8":                            true, "64:ff9b::8.8.8.8": true, "2002:808:808::1": true,
	} {
		if got := arbiter.PublicAddress(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PublicAddress(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestValidateWebhookURL(t *testing.T) {
	for _, c := range []struct {
		url          string
		allowPrivate bool
		ok           bool
	}{
		{"https://example.com/hooks", false, true},
		{"  https://example.com:8443/hooks?x=1  ", false, true},
		{"http://example.com/hooks", false, false},
		{"http://localhost:8080/hooks", true, true},
		{"https://127.0.0.1/hooks", false, false},
		{"https://[::1]/hooks", false, false},
		{"https://10.0.0.1/hooks", false, false},
		{"https://169.254.169.254/latest", false, false},
		{"https://127.0.0.1/hooks", true, true},
		{"https://user:pw@example.com/", false, false},
		{"https://example.com/#frag", false, false},
		{"https:///path", false, false},
		{"ftp://example.com/", false, false},
		{"example.com/hooks", false, false},
		{"https://example.com:99999/", false, false},
		{"https://exa mple.com/", false, false},
		{"", false, false},
		{"https://example.com/" + strings.Repeat("a", arbiter.MaxWebhookURLBytes), false, false},
	} {
		got, err := arbiter.ValidateWebhookURL("callback_url", c.url, c.allowPrivate)
		if (err == nil) != c.ok {
			t.Errorf("ValidateWebhookURL(%q, %v) = %q, %v; want ok %v", c.url, c.allowPrivate, got, err, c.ok)
		}
		if err != nil && (arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.HasPrefix(arbiter.ErrorMessage(err), "callback_url")) {
			t.Errorf("%q: %v, want EINVALID naming the field", c.url, err)
		}
	}
}

func TestWebhookEndpointInput_Validate(t *testing.T) {
	in := arbiter.WebhookEndpointInput{URL: "https://example.com/h", Description: "  crm  ",
		EventTypes: []string{arbiter.EventTaskExpired, arbiter.EventTaskCompleted}}
	if err := in.Validate(false); err != nil {
		t.Fatal(err)
	}
	if in.Description != "crm" || strings.Join(in.EventTypes, ",") != "task.completed,task.expired" {
		t.Errorf("normalized to %+v", in)
	}
	all := arbiter.WebhookEndpointInput{URL: "https://example.com/h", EventTypes: arbiter.WebhookEventTypes}
	if err := all.Validate(false); err != nil || all.EventTypes != nil {
		t.Errorf("every type chosen: %v %v, want none stored (all)", all.EventTypes, err)
	}
	bad := arbiter.WebhookEndpointInput{URL: "https://example.com/h", EventTypes: []string{"task.created"}}
	if err := bad.Validate(false); arbiter.ErrorCode(err) != arbiter.EINVALID {
		t.Errorf("an unknown type: %v", err)
	}
	e := arbiter.WebhookEndpoint{EventTypes: []string{arbiter.EventTaskCompleted}}
	if e.Wants(arbiter.EventTaskExpired) || !e.Wants(arbiter.EventTaskCompleted) || !e.Wants(arbiter.EventPing) {
		t.Error("Wants does not follow the event types")
	}
}

// TestParseTaskCreate_CallbackURL: callback_url is read and checked for its
// form when parsed; where it may lead is checked by CheckCallbackURL,
// which the server's setting relaxes. It takes part in the fingerprint.
func TestParseTaskCreate_CallbackURL(t *testing.T) {
	base := `{"prompt":"p","allowed_verdicts":["a"]`
	in, err := arbiter.ParseTaskCreate([]byte(base + `,"callback_url":"https://example.com/resume?id=1"}`))
	if err != nil || in.CallbackURL != "https://example.com/resume?id=1" || in.CheckCallbackURL(false) != nil {
		t.Fatalf("%+v %v", in, err)
	}
	local, err := arbiter.ParseTaskCreate([]byte(base + `,"callback_url":"http://127.0.0.1:9000/resume"}`))
	if err != nil {
		t.Fatal(err)
	}
	if arbiter.ErrorCode(local.CheckCallbackURL(false)) != arbiter.EINVALID || local.CheckCallbackURL(true) != nil {
		t.Error("a loopback http callback is refused unless private addresses are allowed")
	}
	plain, _ := arbiter.ParseTaskCreate([]byte(base + `}`))
	if _, err := arbiter.ParseTaskCreate([]byte(base + `,"callback_url":""}`)); arbiter.ErrorField(err) != "callback_url" {
		t.Errorf("an empty callback_url: %v, want refused, naming callback_url", err)
	}
	if in.Fingerprint() == plain.Fingerprint() || in.Fingerprint() == local.Fingerprint() {
		t.Error("callback_url does not take part in the fingerprint")
	}
	for _, body := range []string{`,"callback_url":1}`, `,"callback_url":"ftp://x"}`, `,"callback_url":"https://a b"}`} {
		if _, err := arbiter.ParseTaskCreate([]byte(base + body)); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestWebhookResponseExcerpt: whatever a receiver answers, the excerpt is
// valid UTF-8 without NUL (which Postgres text refuses), at most
// WebhookResponseBodyBytes long, and keeps what it can of the text.
func TestWebhookResponseExcerpt(t *testing.T) {
	limit := arbiter.WebhookResponseBodyBytes
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, ""},
		{"plain text stays", []byte(`{"error":"down"}`), `{"error":"down"}`},
		{"a NUL reads as ␀", []byte("bad\x00body\x00"), "bad␀body␀"},
		{"invalid bytes read as U+FFFD", []byte("a\xff\xfeb\xc0"), "a\uFFFDb\uFFFD"},
		{"a lone surrogate reads as U+FFFD", []byte("x\xed\xa0\x80y"), "x\uFFFDy"},
		{"cut at the limit", []byte(strings.Repeat("a", limit+10)), strings.Repeat("a", limit)},
		{"a character cut off at the limit is dropped", []byte(strings.Repeat("a", limit-1) + "é"), strings.Repeat("a", limit-1)},
		{"replacements never pass the limit", []byte(strings.Repeat("\x00", limit+5)), strings.Repeat("␀", limit/3)},
		{"invalid bytes at the limit", []byte(strings.Repeat("a", limit-2) + "\xff\xff\xff"), strings.Repeat("a", limit-2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := arbiter.WebhookResponseExcerpt(c.body)
			if got != c.want {
				t.Errorf("got %q (%d bytes), want %q", got, len(got), c.want)
			}
			if !utf8.ValidString(got) || strings.ContainsRune(got, 0) || len(got) > limit {
				t.Errorf("the excerpt is not storable: %q", got)
			}
		})
	}
}

// TestNewWebhookPayload_Timestamp: the timestamp reads as docs/webhooks.md's
// examples do: RFC 3339 in UTC to the millisecond, trailing zeros dropped.
func TestNewWebhookPayload_Timestamp(t *testing.T) {
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 11, 23, 18, 33, 20, 123_456_789, time.UTC), "2026-11-23T18:33:20.123Z"},
		{time.Date(2026, 11, 23, 18, 30, 0, 0, time.UTC), "2026-11-23T18:30:00Z"},
		{time.Date(2026, 11, 23, 18, 30, 0, 500_000_000, time.UTC), "2026-11-23T18:30:00.5Z"},
		{time.Date(2026, 11, 23, 19, 30, 0, 999_999, time.FixedZone("CET", 3600)), "2026-11-23T18:30:00Z"},
		{arbiter.Timestamp(1795415600123).Time(), "2026-11-23T06:33:20.123Z"},
	} {
		body, err := arbiter.NewWebhookPayload(arbiter.EventPing, c.at, nil)
		if err != nil {
			t.Fatal(err)
		}
		var p arbiter.WebhookPayload
		if err := json.Unmarshal(body, &p); err != nil || p.Timestamp != c.want {
			t.Errorf("%v: timestamp %q (%v), want %q", c.at, p.Timestamp, err, c.want)
		}
	}
}

// TestTaskEventTime: a completion and an expiry happened when the task
// says they did; other events, at the change.
func TestTaskEventTime(t *testing.T) {
	now := time.Date(2026, 11, 23, 18, 40, 0, 0, time.UTC)
	completed, expired := arbiter.Timestamp(1795415600123), arbiter.Timestamp(1795415700456)
	task := &arbiter.Task{CompletedAt: &completed}
	for _, c := range []struct {
		event string
		task  *arbiter.Task
		want  time.Time
	}{
		{arbiter.EventTaskCompleted, task, completed.Time()},
		{arbiter.EventTaskExpired, &arbiter.Task{ExpiredAt: &expired}, expired.Time()},
		{arbiter.EventTaskHumanNeeded, task, now},
		{arbiter.EventTaskAuditDisagreed, task, now},
		{arbiter.EventTaskCompleted, &arbiter.Task{}, now},
	} {
		if got := arbiter.TaskEventTime(c.event, c.task, now); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.event, got, c.want)
		}
	}
}

func TestPrivateHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "::1": true, "10.0.0.8": true, "169.254.169.254": true, "192.168.1.5": true,
		"intranet": true, "printer.local": true, "db.internal": true, "box.home.arpa": true,
		"example.com": false, "arbiter.example.com": false, "93.184.216.34": false, "2606:4700::1111": false,
	} {
		if got := arbiter.PrivateHost(host); got != want {
			t.Errorf("PrivateHost(%q) = %v, want %v", host, got, want)
		}
	}
}
