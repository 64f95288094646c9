// Package arbiter is Arbiter's domain: the types, the rules that make them
// valid and move them, and the service interfaces the store implements and
// the handlers and worker call. Its files, by topic:
//
//   - Tasks (task.go, task_encode.go, display.go, tasklist.go, wait.go,
//     idempotency.go, jsonobject.go): a create and its strict JSON, the
//     task's own JSON encoder, the display hint, the list's filters and
//     pages, waiting for a final status, idempotency keys, and
//     DecodeJSONObject.
//   - A task's path (queue.go, verifier.go, cascade.go, policy.go,
//     escalation.go): the pure steps NextAgentStep, LostAgentStep and
//     HumanDecision, what a verifier answers and the named verifiers of a
//     verifiers file, the agent tier's cascade and its step, policies per
//     task type and the on-expiry outcome at the deadline, reminders and
//     escalation rungs.
//   - People deciding (reservation.go, consensus.go, gold.go, agreement.go,
//     stats.go, bulk.go): reservations on the desk, votes and the consensus
//     rule, gold tasks, agreement between reviewers, the desk's statistics,
//     the tasks a person may decide together.
//   - Calibration (calibration.go, calibration_certify.go,
//     calibration_apply.go, calibration_drift.go, verifier_pairs.go,
//     cascade_report.go, backtest.go, cascade_sim.go): audit sampling and
//     the estimators, the certified threshold, applying it to a policy,
//     drift, the labels of each verifier of a cascade, who decided and the
//     bound on the agent tier's error, backtesting a verifier on those
//     labels, the simulated deployments that check the cascade's
//     certificates.
//   - Accounts and people (account.go, member.go, session.go, login.go,
//     apikey.go, audit.go): members and roles, sessions, sign-in links, API
//     keys, the audit log.
//   - Telling people and programs (event.go, delivery.go, webhook.go,
//     slack.go, teams.go, chatlink.go, chatview.go, mailbox.go, notify.go,
//     decisionlink.go): the task events a change publishes to every
//     outbound channel, the one retry rule of their deliveries, webhooks,
//     Slack, Microsoft Teams, chat users linked to the people they decide
//     as, what a chat message shows of a task, the mail outbox, the
//     reviewers' digests,
//     decision links in mail.
//   - Approval integrity (action.go, receipt.go, audit_export.go,
//     execution.go): the action a task asks about, its canonical form and
//     digest, edits as a JSON Patch between the proposed and the approved
//     action; the signed receipts of final decisions and their keys; the
//     hash-chained audit export and its offline check; the one claim to
//     run an approved action.
//   - The curated demo queue (demo.go) and health (health.go).
//   - What every request shares (error.go, ratelimit.go, inflight.go,
//     waiters.go, this file): the error codes, per-client rate limits,
//     in-flight limits, the bounds on waiting requests per key and per
//     account, Timestamp, Clock and NewID.
//
// TestPackageDoc_NamesEveryFile keeps this list whole. The package imports
// no web, SQL or template package (see ARCHITECTURE.md). Helpers that are
// not the domain's live under internal/: jsonfields (a struct's exact JSON
// member names), useragent (browser names for the audit log), secretbox
// (secrets sealed at rest), taskview (how the desk shows a task's context),
// jcs (the RFC 8785 canonical form of JSON), celtask (CEL expressions over
// a task, for rules and require_person_if) and testutil.
package arbiter

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Timestamp is an instant with millisecond precision. On the wire it is Unix
// epoch seconds with three fractional digits, as a JSON number
// (1763805600.123); in the store it is an integer count of milliseconds.
type Timestamp int64

// TimestampOf converts t to a Timestamp, dropping sub-millisecond precision.
func TimestampOf(t time.Time) Timestamp { return Timestamp(t.UnixMilli()) }

// Time returns ts as a time.Time in UTC.
func (ts Timestamp) Time() time.Time { return time.UnixMilli(int64(ts)).UTC() }

// AppendJSON appends ts as epoch seconds with three decimals.
func (ts Timestamp) AppendJSON(b []byte) []byte {
	ms := int64(ts)
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	frac := ms % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

// MarshalJSON writes ts as epoch seconds with three decimals.
func (ts Timestamp) MarshalJSON() ([]byte, error) {
	return ts.AppendJSON(make([]byte, 0, 16)), nil
}

// UnmarshalJSON reads epoch seconds, fractional or not.
func (ts *Timestamp) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return Errorf(EINVALID, "A timestamp must be a number of seconds since the Unix epoch.")
	}
	*ts = Timestamp(f*1000 + 0.5)
	return nil
}

// Clock tells the time. Services take one so tests can move it.
type Clock func() time.Time

// NewID returns prefix followed by n random bytes in lowercase hex, read from
// crypto/rand. It is the one ID generator of the project.
func NewID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return prefix + hex.EncodeToString(b)
}

// isLowerHex reports whether s consists of lowercase hexadecimal digits only.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isText reports whether s is valid UTF-8 without NUL, which Postgres
// refuses to store in a text column.
func isText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
