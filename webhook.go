package arbiter

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Webhooks tell an account's endpoints, and a task's callback_url, that a
// task changed: signed, durable and retried as the Standard Webhooks
// specification (standardwebhooks.com) describes. The message of a change is
// written in the same transaction as the change (an outbox), so nothing is
// lost when a process dies; workers deliver it under a lease, at least once.

// WebhookEventTypes are the event types an endpoint can subscribe to, in the
// order the dashboard lists them. A ping goes to the endpoint it tests,
// whatever it subscribes to.
var WebhookEventTypes = []string{EventTaskHumanNeeded, EventTaskCompleted, EventTaskExpired, EventTaskAuditDisagreed,
	EventCalibrationDrifted, EventTaskVoteRecorded, EventTaskEscalated}

// CallbackEventTypes are the event types a task's callback_url receives:
// those about the task. An account's events (calibration.drifted) go to
// its endpoints only.
var CallbackEventTypes = []string{EventTaskHumanNeeded, EventTaskCompleted, EventTaskExpired, EventTaskAuditDisagreed, EventTaskEscalated}

// Webhook message statuses.
const (
	WebhookPending   = "pending"   // waiting for its next attempt
	WebhookHeld      = "held"      // kept while its endpoint is disabled, sent when it is enabled
	WebhookDelivered = "delivered" // an attempt got a 2xx
	WebhookFailed    = "failed"    // every attempt of the schedule failed, or its endpoint is gone
)

// WebhookMessageStatuses lists the statuses the delivery log filters by.
var WebhookMessageStatuses = []string{WebhookPending, WebhookHeld, WebhookDelivered, WebhookFailed}

// Why an endpoint was disabled.
const (
	WebhookDisabledByPerson = "disabled" // someone turned it off on the dashboard
	WebhookDisabledGone     = "gone"     // it answered 410 Gone
	WebhookDisabledFailing  = "failing"  // its messages all failed for WebhookFailingLimit
)

const (
	webhookSecretPrefix     = "whsec_" // Standard Webhooks' secret prefix
	webhookSignatureVersion = "v1"     // the HMAC-SHA256 scheme
)

// Limits and times of webhooks, documented in docs/webhooks.md.
const (
	// MaxWebhookEndpoints bounds the endpoints of one account.
	MaxWebhookEndpoints = 20
	// MaxWebhookURLBytes bounds an endpoint's or a callback's URL.
	MaxWebhookURLBytes = 2000
	// MaxWebhookDescriptionChars bounds an endpoint's description.
	MaxWebhookDescriptionChars = 200
	// WebhookTimeout is how long an attempt may take: a 2xx within it is
	// a delivery, anything else a failure.
	WebhookTimeout = 10 * time.Second
	// WebhookSecretOverlap is how long the previous secret still signs
	// after a rotation.
	WebhookSecretOverlap = 24 * time.Hour
	// WebhookFailingLimit is how long an endpoint's attempts may all fail
	// before it is disabled and its owner told.
	WebhookFailingLimit = 5 * 24 * time.Hour
	// WebhookResponseBodyBytes is how much of a response body the attempt
	// log keeps.
	WebhookResponseBodyBytes = 1024
	// WebhookLogMessages is how many messages the delivery log shows.
	WebhookLogMessages = 100
	// WebhookRetention is how long delivered, failed and held messages,
	// with their attempts, are kept; workers delete them after.
	WebhookRetention = 30 * 24 * time.Hour
)

// WebhookUserAgent is the User-Agent of every delivery.
const WebhookUserAgent = "Arbiter-Webhooks/1 (+https://github.com/arbiterhq/arbiter)"

// WebhookRetryDelays are the waits after each failed attempt before the
// next one; after the last, the message is failed. Each is varied by ±10%
// (WebhookJitter) so failures do not retry in lockstep.
var WebhookRetryDelays = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// WebhookCatchUp is how many of an endpoint's messages waiting for a retry
// each delivery to it that succeeds makes due at once, earliest first: a
// receiver that is back gets its backlog at the pace it answers (doubling
// with each round of deliveries) instead of at the schedule's next step.
const WebhookCatchUp = 2

// WebhookJitter is the largest fraction by which a retry delay is varied.
const WebhookJitter = 0.1

// WebhookRetry is the webhooks' retry rule (NextDelivery): their schedule,
// varied by WebhookJitter; a 429 or 503 counts as a failed attempt and
// waits its Retry-After when that is longer.
var WebhookRetry = RetryRule{Delays: WebhookRetryDelays, Jitter: WebhookJitter, ThrottleCounts: true}

// WebhookEndpoint is a URL of an account that receives its events.
type WebhookEndpoint struct {
	ID          string
	AccountID   string
	URL         string
	Description string
	// EventTypes are the events it wants; empty means all of them.
	EventTypes []string
	// Disabled is "" while it receives messages, else why it stopped: one
	// of the WebhookDisabled* reasons.
	Disabled string
	// Secret signs its messages; PreviousSecret, until
	// PreviousSecretExpiresAt, signs them too, after a rotation.
	Secret                  string
	PreviousSecret          string
	PreviousSecretExpiresAt *Timestamp
	CreatedAt               Timestamp
	// FailingSince is when its first failed attempt after its last
	// delivery was made; nil while it delivers.
	FailingSince *Timestamp
}

// Enabled reports whether the endpoint receives messages.
func (e *WebhookEndpoint) Enabled() bool { return e.Disabled == "" }

// Wants reports whether the endpoint subscribes to the event type.
func (e *WebhookEndpoint) Wants(eventType string) bool {
	return eventType == EventPing || len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, eventType)
}

// SigningSecrets returns the secrets that sign a message sent at now: the
// current one, and the previous one during its overlap.
func (e *WebhookEndpoint) SigningSecrets(now time.Time) []string {
	return signingSecrets(e.Secret, e.PreviousSecret, e.PreviousSecretExpiresAt, now)
}

// CallbackSecret is an account's secret for the callback_url of its tasks,
// rotated as an endpoint's is.
type CallbackSecret struct {
	AccountID               string
	Secret                  string
	PreviousSecret          string
	PreviousSecretExpiresAt *Timestamp
}

// SigningSecrets returns the secrets that sign a callback sent at now.
func (c *CallbackSecret) SigningSecrets(now time.Time) []string {
	return signingSecrets(c.Secret, c.PreviousSecret, c.PreviousSecretExpiresAt, now)
}

func signingSecrets(current, previous string, until *Timestamp, now time.Time) []string {
	if previous != "" && until != nil && now.Before(until.Time()) {
		return []string{current, previous}
	}
	return []string{current}
}

// NewWebhookSecret returns a fresh signing secret: "whsec_" and the base64
// of 32 random bytes, as Standard Webhooks defines it.
func NewWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return webhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// NewWebhookEndpointID returns a fresh endpoint id.
func NewWebhookEndpointID() string { return NewID("wh_", 8) }

// NewWebhookMessageID returns a fresh message id: the webhook-id header,
// the same on every attempt of the message.
func NewWebhookMessageID() string { return NewID("msg_", 12) }

// ValidWebhookEndpointID reports whether id has the shape of an endpoint id.
func ValidWebhookEndpointID(id string) bool {
	rest, ok := strings.CutPrefix(id, "wh_")
	return ok && len(rest) == 16 && isLowerHex(rest)
}

// ValidWebhookMessageID reports whether id has the shape of a message id.
func ValidWebhookMessageID(id string) bool {
	rest, ok := strings.CutPrefix(id, "msg_")
	return ok && len(rest) == 24 && isLowerHex(rest)
}

// SignWebhook returns the webhook-signature header of a message: for each
// secret, "v1," and the base64 HMAC-SHA256, keyed with the secret's bytes,
// of "{id}.{timestamp}.{body}"; several are separated by spaces. A secret
// that is not "whsec_" and base64 is skipped (none ever is: secrets come
// from NewWebhookSecret).
func SignWebhook(msgID string, timestamp int64, body []byte, secrets ...string) string {
	var sigs []string
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, webhookSecretPrefix))
		if err != nil {
			continue
		}
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msgID))
		h.Write([]byte{'.'})
		h.Write(strconv.AppendInt(nil, timestamp, 10))
		h.Write([]byte{'.'})
		h.Write(body)
		sigs = append(sigs, webhookSignatureVersion+","+base64.StdEncoding.EncodeToString(h.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// WebhookPayload is the body of every message: the event's type, when it
// happened (RFC 3339, UTC, to the millisecond; see TaskEventTime) and its
// data, for task events the Task as GET /v1/tasks/{id} returned it at that
// moment.
type WebhookPayload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// webhookTimestampLayout writes an event's timestamp: RFC 3339 in UTC to
// the millisecond, as the API keeps its times, trailing zeros dropped
// ("2026-11-23T18:33:20.123Z", "2026-11-23T18:30:00Z").
const webhookTimestampLayout = "2006-01-02T15:04:05.999Z07:00"

// NewWebhookPayload returns the JSON body of an event of the type, at the
// time (to the millisecond), about data.
func NewWebhookPayload(eventType string, at time.Time, data any) ([]byte, error) {
	return json.Marshal(WebhookPayload{Type: eventType, Timestamp: at.UTC().Format(webhookTimestampLayout), Data: data})
}

// TaskEventTime returns when an event of the type about the task happened:
// the task's completed_at for task.completed and its expired_at for
// task.expired, the very instants the payload's task records; otherwise
// now, the moment of the change that announces it.
func TaskEventTime(eventType string, t *Task, now time.Time) time.Time {
	switch {
	case eventType == EventTaskCompleted && t.CompletedAt != nil:
		return t.CompletedAt.Time()
	case eventType == EventTaskExpired && t.ExpiredAt != nil:
		return t.ExpiredAt.Time()
	case eventType == EventTaskEscalated && t.Escalation != nil:
		return t.Escalation.EscalatedAt.Time()
	}
	return now
}

// PingData is the data of a ping: the endpoint it tests.
type PingData struct {
	EndpointID string `json:"endpoint_id"`
}

// ValidateWebhookURL checks an endpoint's or a callback's URL and returns it
// as it will be called: https (http too when allowPrivate, for development),
// a host, no user name or password, no fragment, at most MaxWebhookURLBytes.
// A host that is an IP address must be public unless allowPrivate; a name is
// checked when it is resolved, at each connection. Returns EINVALID, naming
// the field.
func ValidateWebhookURL(field, raw string, allowPrivate bool) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", Errorf(EINVALID, "%s is required: an https:// URL.", field)
	} else if len(raw) > MaxWebhookURLBytes {
		return "", Errorf(EINVALID, "%s must be at most %d bytes.", field, MaxWebhookURLBytes)
	} else if !utf8.ValidString(raw) || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", Errorf(EINVALID, "%s must not contain spaces or control characters.", field)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return "", Errorf(EINVALID, "%s must be a URL such as https://example.com/webhooks.", field)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return "", Errorf(EINVALID, "%s must start with https://.", field)
	}
	switch {
	case u.Hostname() == "":
		return "", Errorf(EINVALID, "%s must name a host.", field)
	case u.User != nil:
		return "", Errorf(EINVALID, "%s must not hold a user name or password; authenticate the messages by their signature.", field)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", Errorf(EINVALID, "%s must not have a #fragment.", field)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", Errorf(EINVALID, "%s has a port that is not a number from 1 to 65535.", field)
		}
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !allowPrivate && !PublicAddress(ip) {
		return "", Errorf(EINVALID, "%s must be a public address, not a private, loopback or reserved one.", field)
	}
	return u.String(), nil
}

// nonPublicPrefixes are ranges that Go's netip does not classify as private,
// loopback or link-local but that are not the public internet either.
var nonPublicPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:10::/28"),    // deprecated ORCHID
	netip.MustParsePrefix("2001:20::/28"),    // ORCHIDv2
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
}

// PublicAddress reports whether a delivery may connect to ip: not loopback,
// private (RFC 1918, ULA), link-local (169.254.0.0/16 with the cloud
// metadata address, fe80::/10), multicast, unspecified or otherwise
// reserved. An IPv6 address that embeds an IPv4 one (see embeddedIPv4)
// is public only when every address it embeds is public too, since a
// translator or tunnel on the way may deliver it there. Both the URL
// check and the delivery's dial guard ask this one function.
func PublicAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() ||
		ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	for _, v4 := range embeddedIPv4(ip) {
		if !PublicAddress(v4) {
			return false
		}
	}
	return true
}

// Prefixes of IPv6 addresses that carry an IPv4 address.
var (
	ipv4CompatiblePrefix = netip.MustParsePrefix("::/96")           // ::a.b.c.d (RFC 4291, deprecated)
	ipv4TranslatedPrefix = netip.MustParsePrefix("::ffff:0:0:0/96") // ::ffff:0:a.b.c.d (SIIT, RFC 2765)
	nat64Prefix          = netip.MustParsePrefix("64:ff9b::/96")    // NAT64's well-known prefix (RFC 6052)
	sixToFourPrefix      = netip.MustParsePrefix("2002::/16")       // 6to4 (RFC 3056): the IPv4 address follows
	teredoPrefix         = netip.MustParsePrefix("2001::/32")       // Teredo (RFC 4380)
)

// embeddedIPv4 returns the IPv4 addresses that an IPv6 address carries in
// one of the well-known forms: IPv4-compatible and IPv4-translated (the
// last 32 bits), NAT64's well-known prefix (the last 32 bits), 6to4 (bits
// 16 to 48), Teredo (the server in bits 32 to 64, the client in the last
// 32 bits inverted) and an ISATAP interface identifier (…:0:5efe:a.b.c.d
// or …:200:5efe:a.b.c.d, under any prefix). An IPv4-mapped address is
// judged as IPv4 before it comes here.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	last := netip.AddrFrom4([4]byte(b[12:16]))
	var out []netip.Addr
	switch {
	case ipv4CompatiblePrefix.Contains(ip), ipv4TranslatedPrefix.Contains(ip), nat64Prefix.Contains(ip):
		out = append(out, last)
	case sixToFourPrefix.Contains(ip):
		out = append(out, netip.AddrFrom4([4]byte(b[2:6])))
	case teredoPrefix.Contains(ip):
		out = append(out, netip.AddrFrom4([4]byte(b[4:8])),
			netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}))
	}
	if (b[8] == 0 || b[8] == 2) && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, last)
	}
	return out
}

// WebhookEndpointInput is a create or an edit of an endpoint, from the
// dashboard's form.
type WebhookEndpointInput struct {
	URL         string
	Description string
	// EventTypes are the events wanted; empty means all of them.
	EventTypes []string
}

// Validate checks the input and normalizes it in place: the URL as
// ValidateWebhookURL returns it, the description trimmed, the event types
// known and in WebhookEventTypes' order, and none when all are chosen.
// Returns EINVALID.
func (in *WebhookEndpointInput) Validate(allowPrivate bool) error {
	u, err := ValidateWebhookURL("The URL", in.URL, allowPrivate)
	if err != nil {
		return err
	}
	in.URL = u
	in.Description = strings.TrimSpace(in.Description)
	if utf8.RuneCountInString(in.Description) > MaxWebhookDescriptionChars {
		return Errorf(EINVALID, "The description must be at most %d characters.", MaxWebhookDescriptionChars)
	} else if strings.IndexByte(in.Description, 0) >= 0 {
		return Errorf(EINVALID, "The description must not contain NUL characters.")
	}
	var types []string
	for _, t := range WebhookEventTypes {
		if slices.Contains(in.EventTypes, t) {
			types = append(types, t)
		}
	}
	for _, t := range in.EventTypes {
		if !slices.Contains(WebhookEventTypes, t) {
			return Errorf(EINVALID, "%q is not an event type; choose among %s.", t, strings.Join(WebhookEventTypes, ", "))
		}
	}
	if len(types) == len(WebhookEventTypes) {
		types = nil
	}
	in.EventTypes = types
	return nil
}

// WebhookMessage is one event on its way to one destination: an endpoint,
// or a task's callback_url.
type WebhookMessage struct {
	ID        string
	AccountID string
	// EndpointID is the endpoint it goes to; "" for a callback.
	EndpointID string
	// URL is where it goes: the callback_url, or the endpoint's URL.
	URL       string
	EventType string
	// TaskID is the task the event is about; "" for a ping.
	TaskID  string
	Payload json.RawMessage
	Status  string // one of WebhookMessageStatuses
	// Attempts counts the attempts made so far.
	Attempts int
	// NextAttemptAt is when a pending message is due.
	NextAttemptAt Timestamp
	CreatedAt     Timestamp
	// LastAttemptAt and LastStatusCode describe the latest attempt (0: no
	// response); nil and 0 before the first.
	LastAttemptAt  *Timestamp
	LastStatusCode int
	// TraceParent is the W3C trace context of the span that queued the
	// message ("" when tracing was off): its delivery's span is a child.
	TraceParent string
}

// WebhookAttempt is one try at delivering a message, for the attempt log.
type WebhookAttempt struct {
	MessageID   string
	AttemptedAt Timestamp
	// StatusCode is the response's status, 0 when none came (Error says
	// why).
	StatusCode int
	Latency    time.Duration
	// ResponseBody is the first WebhookResponseBodyBytes of the response
	// body, as WebhookResponseExcerpt makes it storable.
	ResponseBody string
	// Error says why no response came, or why a response was refused.
	Error string
}

// WebhookResponseExcerpt returns what the attempt log keeps of a response
// body: its first WebhookResponseBodyBytes as text that every store can
// hold, whatever a receiver sent. Bytes that are not UTF-8 read as U+FFFD
// (a character cut off at the end is dropped), and each NUL, which a
// Postgres text value cannot hold, reads as U+2400 (␀).
func WebhookResponseExcerpt(body []byte) string {
	if len(body) > WebhookResponseBodyBytes {
		body = body[:WebhookResponseBodyBytes]
	}
	s := strings.ToValidUTF8(string(trimPartialRune(body)), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\u2400")
	// The replacements are longer than what they replace.
	for len(s) > WebhookResponseBodyBytes {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// trimPartialRune drops a UTF-8 sequence cut off at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// Succeeded reports whether the attempt delivered the message: a 2xx.
func (a *WebhookAttempt) Succeeded() bool { return a.StatusCode >= 200 && a.StatusCode < 300 }

// WebhookDelivery is a claimed message with what sending it needs: where
// to and the secrets that sign it now.
type WebhookDelivery struct {
	Message *WebhookMessage
	Secrets []string
}

// WebhookStep is what an attempt does to its message.
type WebhookStep struct {
	Attempt WebhookAttempt
	// Status is the message's next status.
	Status string
	// NextAttemptAt is when a message still pending is tried again.
	NextAttemptAt Timestamp
	// DisableEndpoint, when not "", disables the message's endpoint for
	// that reason (WebhookDisabledGone).
	DisableEndpoint string
}

// NextWebhookStep routes an attempt, the attempts-th of its message (1 for
// the first), made at now: a 2xx delivers the message; a 410 from an
// endpoint fails it and disables the endpoint; anything else is retried
// after WebhookRetryDelays[attempts-1], varied by jitter (a fraction from
// -WebhookJitter to WebhookJitter) or longer when the answer was a 429 or
// 503 whose Retry-After asks for more (at most a day), until the delays
// run out and the message is failed.
func NextWebhookStep(a WebhookAttempt, attempts int, endpoint bool, retryAfter time.Duration, now time.Time, jitter float64) WebhookStep {
	step := WebhookStep{Attempt: a}
	switch {
	case a.Succeeded():
		step.Status = WebhookDelivered
		return step
	case a.StatusCode == 410 && endpoint:
		step.Status, step.DisableEndpoint = WebhookFailed, WebhookDisabledGone
		return step
	}
	var o DeliveryOutcome
	if a.StatusCode == 429 || a.StatusCode == 503 {
		o.RetryAfter = retryAfter
	}
	next := NextDelivery(WebhookRetry, attempts-1, o, jitter)
	if next.State != DeliveryRetry {
		step.Status = WebhookFailed
		return step
	}
	step.Status, step.NextAttemptAt = WebhookPending, TimestampOf(now.Add(next.Delay))
	return step
}

// ParseRetryAfter reads a Retry-After header, in seconds or as an HTTP
// date relative to now; 0 when absent or unreadable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(min(n, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// EndpointFailingTooLong reports whether an endpoint failing since then
// has failed for WebhookFailingLimit at now, and is to be disabled.
func EndpointFailingTooLong(since *Timestamp, now time.Time) bool {
	return since != nil && now.Sub(since.Time()) >= WebhookFailingLimit
}

// WebhookResendSince bounds how far back "Resend all failed since" reaches.
const WebhookResendSince = 30 * 24 * time.Hour

// WebhookService manages an account's endpoints, its callback secret and
// its delivery log, for the dashboard. Every method takes the account and
// answers ENOTFOUND for another account's endpoint or message.
type WebhookService interface {
	// CreateWebhookEndpoint validates in (allowPrivate as
	// ValidateWebhookURL takes it) and stores a new enabled endpoint with
	// a fresh secret, recording it in the audit log in the same
	// transaction. Returns EINVALID, or ECONFLICT past
	// MaxWebhookEndpoints.
	CreateWebhookEndpoint(ctx context.Context, accountID string, in WebhookEndpointInput, allowPrivate bool, by Actor) (*WebhookEndpoint, error)

	// UpdateWebhookEndpoint validates in as CreateWebhookEndpoint does and
	// sets the endpoint's URL, description and event types, recording it
	// in the audit log in the same transaction. Its secret, status and
	// messages stay: a message not yet delivered goes to the new URL;
	// messages already queued keep their event types. Returns EINVALID.
	UpdateWebhookEndpoint(ctx context.Context, accountID, id string, in WebhookEndpointInput, allowPrivate bool, by Actor) (*WebhookEndpoint, error)

	// ListWebhookEndpoints returns the account's endpoints, oldest first.
	ListWebhookEndpoints(ctx context.Context, accountID string) ([]*WebhookEndpoint, error)

	// FindWebhookEndpoint returns the account's endpoint.
	FindWebhookEndpoint(ctx context.Context, accountID, id string) (*WebhookEndpoint, error)

	// SetWebhookEndpointEnabled enables the endpoint (clearing its failure
	// record, and making the messages that waited for it due, oldest
	// first) or disables it as WebhookDisabledByPerson (holding the
	// messages not yet delivered: a disabled endpoint's messages are
	// written as held, and kept for WebhookRetention).
	SetWebhookEndpointEnabled(ctx context.Context, accountID, id string, enabled bool, by Actor) (*WebhookEndpoint, error)

	// DeleteWebhookEndpoint deletes the endpoint with its messages and
	// attempts, recording it in the audit log.
	DeleteWebhookEndpoint(ctx context.Context, accountID, id string, by Actor) error

	// RotateWebhookSecret gives the endpoint a new secret; the old one
	// signs too for WebhookSecretOverlap. Recorded in the audit log.
	RotateWebhookSecret(ctx context.Context, accountID, id string, by Actor) (*WebhookEndpoint, error)

	// FindCallbackSecret returns the account's callback secret, creating
	// it on first use.
	FindCallbackSecret(ctx context.Context, accountID string) (*CallbackSecret, error)

	// RotateCallbackSecret rotates the account's callback secret as
	// RotateWebhookSecret does an endpoint's.
	RotateCallbackSecret(ctx context.Context, accountID string, by Actor) (*CallbackSecret, error)

	// SendWebhookPing queues a ping to the endpoint, enabled or not, due
	// at once.
	SendWebhookPing(ctx context.Context, accountID, endpointID string) (*WebhookMessage, error)

	// ListWebhookMessages returns the endpoint's latest messages, newest
	// first, at most limit, with the status when it is not "". Returns
	// EINVALID for an unknown status.
	ListWebhookMessages(ctx context.Context, accountID, endpointID, status string, limit int) ([]*WebhookMessage, error)

	// FindWebhookMessage returns the endpoint's message with its
	// attempts, oldest first.
	FindWebhookMessage(ctx context.Context, accountID, endpointID, messageID string) (*WebhookMessage, []WebhookAttempt, error)

	// ResendWebhookMessage makes the endpoint's message pending again, due
	// at once, with the same webhook-id; its schedule starts over. For a
	// disabled endpoint it is held instead.
	ResendWebhookMessage(ctx context.Context, accountID, endpointID, messageID string) error

	// ResendFailedWebhookMessages resends the endpoint's failed messages
	// created at or after since, and returns how many.
	ResendFailedWebhookMessages(ctx context.Context, accountID, endpointID string, since Timestamp) (int, error)
}

// WebhookDeliveryService is the store side of delivering messages.
type WebhookDeliveryService interface {
	// ClaimWebhookMessages leases up to max due messages to owner, for the
	// lease counted by the database's clock: pending messages whose next
	// attempt is due and that no live lease holds, to callbacks and
	// enabled endpoints (a ping goes to a disabled one too). Each comes
	// with its URL and the secrets that sign it now.
	ClaimWebhookMessages(ctx context.Context, owner string, max int, lease time.Duration) ([]*WebhookDelivery, error)

	// RecordWebhookAttempt records an attempt on a message owner holds and
	// moves it on as step says, in one transaction; it tracks the
	// endpoint's failures and disables it (holding its messages) when step
	// says so or when it has failed for WebhookFailingLimit; a delivery
	// makes WebhookCatchUp of its endpoint's waiting messages due. Returns
	// the endpoint when this
	// attempt disabled it, for its owner to be told, and ECONFLICT,
	// changing nothing, when the lease was lost.
	RecordWebhookAttempt(ctx context.Context, owner, messageID string, step WebhookStep) (*DisabledWebhookEndpoint, error)

	// RecordWebhookAttempts records several attempts as
	// RecordWebhookAttempt does, sharing a transaction when it can, and
	// answers each in order; a lost lease is that record's ECONFLICT, and
	// one attempt the store refuses fails that record alone. The error is
	// for the call as a whole, when nothing was recorded.
	RecordWebhookAttempts(ctx context.Context, owner string, records []WebhookRecord) ([]WebhookRecorded, error)

	// ReleaseWebhookMessages ends the leases owner still holds.
	ReleaseWebhookMessages(ctx context.Context, owner string) error

	// PruneWebhookMessages deletes up to max delivered, failed or held
	// messages created before before, with their attempts, and returns
	// how many.
	PruneWebhookMessages(ctx context.Context, before Timestamp, max int) (int, error)
}

// WebhookRecord is an attempt to record: its message and what it does.
type WebhookRecord struct {
	MessageID string
	Step      WebhookStep
}

// WebhookRecorded answers one WebhookRecord: the endpoint it disabled, if
// any, or ECONFLICT when the lease was lost.
type WebhookRecorded struct {
	Disabled *DisabledWebhookEndpoint
	Err      error
}

// DisabledWebhookEndpoint is an endpoint an attempt disabled. The
// transaction that disabled it wrote the mail that tells its account
// (WebhookDisabledMail) to the mail outbox.
type DisabledWebhookEndpoint struct {
	Endpoint *WebhookEndpoint
}

// WebhookDisabledMail is the mail that tells an account's address that an
// attempt disabled one of its endpoints, and why.
type WebhookDisabledMail struct {
	EndpointID string
	URL        string
	// Reason is WebhookDisabledGone or WebhookDisabledFailing.
	Reason string
}

// Subject is the webhook mail's subject.
func (m WebhookDisabledMail) Subject() string { return "Arbiter disabled a webhook endpoint" }

// Body is the webhook mail's text.
func (m WebhookDisabledMail) Body() string {
	why := "it answered 410 Gone, which says the URL is no longer in use"
	if m.Reason == WebhookDisabledFailing {
		why = "every delivery to it has failed for " + strconv.Itoa(int(WebhookFailingLimit.Hours()/24)) + " days"
	}
	return strings.Join([]string{
		"Hello,",
		"",
		"Arbiter stopped sending webhooks to this endpoint of your account, because " + why + ":",
		"",
		m.URL,
		"",
		"Messages for it are kept. Once the endpoint answers again, enable it on the Webhooks page of the dashboard; its delivery log lists what failed, and \"Resend all failed\" sends it again.",
		"",
		"— Arbiter",
	}, "\r\n")
}

// Audit event kinds of webhooks.
const (
	AuditWebhookCreated        = "webhook_created"
	AuditWebhookUpdated        = "webhook_updated"
	AuditWebhookDeleted        = "webhook_deleted"
	AuditWebhookRotated        = "webhook_secret_rotated"
	AuditWebhookEnabled        = "webhook_enabled"
	AuditWebhookDisabled       = "webhook_disabled"
	AuditCallbackSecretRotated = "callback_secret_rotated"
)

// NewWebhookAuditEvent returns the audit event of a change to the account's
// endpoint (or, with a nil endpoint, its callback secret) by the actor.
func NewWebhookAuditEvent(kind, accountID string, e *WebhookEndpoint, by Actor) *AuditEvent {
	detail := "callback secret"
	if e != nil {
		detail = e.URL + " (" + e.ID + ")"
	}
	return &AuditEvent{
		AccountID: accountID,
		Kind:      kind,
		Actor:     by.Email,
		Detail:    detail,
		ClientIP:  by.Client.IP,
		UserAgent: by.Client.UserAgent,
	}
}

// PrivateHost reports whether host (a URL's, without port) is an address
// that is not public (PublicAddress) or a name that only a private network
// resolves (localhost, intranet names, .local, .internal, …): a link the
// desk does not follow, an address Slack cannot reach.
func PrivateHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return !PublicAddress(ip)
	}
	host = strings.TrimSuffix(host, ".")
	if !strings.Contains(host, ".") {
		return true // localhost, intranet names
	}
	for _, suffix := range []string{".localhost", ".local", ".internal", ".lan", ".home.arpa", ".corp"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}
