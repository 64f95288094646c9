package arbiter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The mail outbox: a reminder, an escalation rung, a reviewer's digest, a
// calibration drift mail and the notice of a disabled webhook endpoint are
// rows written in the transaction that makes them due, one per recipient,
// each with its content; the mail deliverer
// claims them under a lease, renders each with the addresses it knows
// (MailLinks), sends it and moves it on by MailRetry. An SMTP server that
// is down delays mail; it does not lose it.

// Kinds of mail in the outbox.
const (
	MailReminder   = AlertReminder
	MailEscalation = AlertEscalation
	MailDigest     = "digest"
	MailDrift      = "drift"
	// MailWebhookDisabled tells an account that an attempt disabled one
	// of its webhook endpoints.
	MailWebhookDisabled = "webhook_disabled"
)

// Mail statuses.
const (
	MailPending = "pending" // waiting for its next attempt
	MailSent    = "sent"    // the SMTP server took it
	MailFailed  = "failed"  // refused for good, or its schedule ran out
)

// MailRetry is the mail's retry rule (NextDelivery): waits that grow from
// 30 seconds to 12 hours, varied by 10%, about three days in all before a
// mail is given up; a server that says to try later (4xx) counts as a
// failed attempt.
var MailRetry = RetryRule{
	Delays: []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour, 12 * time.Hour, 12 * time.Hour, 12 * time.Hour, 12 * time.Hour},
	Jitter: 0.1, ThrottleCounts: true,
}

// MailRetention is how long sent and failed mail rows are kept before the
// worker deletes them.
const MailRetention = 7 * 24 * time.Hour

// DefaultQuotingMailsPerDay bounds the mails that quote an account's
// callers' text (QuotesCaller) written for the account in one UTC day:
// past it, no more are written that day, so that tasks cannot make
// Arbiter mail the account's members without end.
const DefaultQuotingMailsPerDay = 2000

// QuotesCaller reports whether mail of the kind quotes text the account's
// API callers wrote (a task's prompt): reminders, rungs and digests do.
func QuotesCaller(kind string) bool {
	switch kind {
	case MailReminder, MailEscalation, MailDigest:
		return true
	}
	return false
}

// MailMessage is a row of the mail outbox: one mail to one recipient.
type MailMessage struct {
	ID        string
	AccountID string
	Kind      string
	To        string
	// TaskID is the task a reminder or rung is about; "" for the others.
	TaskID string
	// Content is what the mail says, as JSON: an AlertMail, a Digest, a
	// DriftMail or a WebhookDisabledMail, as Kind says.
	Content  []byte
	Attempts int
	// TraceParent is the W3C trace context of the span that queued the
	// message ("" when tracing was off): its delivery's span is a child.
	TraceParent string
}

// NewMailMessageID returns a fresh mail message id.
func NewMailMessageID() string { return NewID("mlm_", 12) }

// NewMail returns the outbox row of a mail of the kind to one recipient,
// content being the AlertMail, Digest, DriftMail or WebhookDisabledMail it
// renders.
func NewMail(kind, accountID, to, taskID string, content any) (*MailMessage, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("mail content: %w", err)
	}
	return &MailMessage{ID: NewMailMessageID(), AccountID: accountID, Kind: kind, To: to, TaskID: taskID, Content: b}, nil
}

// MailLinks are the addresses mails link to, which the deliverer knows:
// the reviewer site's queue and the calibration report ("" names the page
// without a link).
type MailLinks struct{ QueueURL, ReportURL string }

// Compose returns the mail's subject and body, its content read as its
// kind says.
func (m *MailMessage) Compose(links MailLinks) (subject, body string, err error) {
	read := func(v any) error {
		if err := json.Unmarshal(m.Content, v); err != nil {
			return fmt.Errorf("mail %s: read its %s: %w", m.ID, m.Kind, err)
		}
		return nil
	}
	switch m.Kind {
	case MailReminder, MailEscalation:
		var a AlertMail
		if err := read(&a); err != nil {
			return "", "", err
		}
		return a.Subject(), a.Body(links.QueueURL), nil
	case MailDigest:
		var d Digest
		if err := read(&d); err != nil {
			return "", "", err
		}
		return d.Subject(), d.Body(links.QueueURL), nil
	case MailDrift:
		var d DriftMail
		if err := read(&d); err != nil {
			return "", "", err
		}
		return d.Subject(), d.Body(links.ReportURL), nil
	case MailWebhookDisabled:
		var w WebhookDisabledMail
		if err := read(&w); err != nil {
			return "", "", err
		}
		return w.Subject(), w.Body(), nil
	}
	return "", "", fmt.Errorf("mail %s: no such kind %q", m.ID, m.Kind)
}

// MailRecord is an attempt at a mail to record: the mail, where the
// attempt leaves it, and the attempt's error ("" when sent).
type MailRecord struct {
	MailID    string
	Step      DeliveryStep
	LastError string
}

// MailDeliveryService is the mail outbox's side of the store.
type MailDeliveryService interface {
	// ClaimMail leases up to max due mails to owner for lease, oldest due
	// first; a mail whose lease ran out is due again.
	ClaimMail(ctx context.Context, owner string, max int, lease time.Duration) ([]*MailMessage, error)

	// RecordMailAttempts records attempts at mails owner holds, in one
	// transaction: each mail moves on as its step says (NextDelivery),
	// noting its error, and its lease ends; a sent mail keeps no copy of
	// its content. It returns an error per record, ECONFLICT where the
	// lease was lost, or an error alone when none was recorded.
	RecordMailAttempts(ctx context.Context, owner string, records []MailRecord) ([]error, error)

	// ReleaseMail ends the leases owner still holds, for a deliverer that
	// stops with mail unsent.
	ReleaseMail(ctx context.Context, owner string) error

	// PruneMail deletes up to max sent or failed mails created before
	// before, and returns how many.
	PruneMail(ctx context.Context, before Timestamp, max int) (int, error)

	// MailQueued receives when this process queued mail, so that an
	// in-process deliverer sends it at once.
	MailQueued() <-chan struct{}
}
