package arbiter

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Notifications: an account may have its reviewers e-mailed when a task has
// waited a while. Each reviewer gets at most one digest an hour, claimed in
// the store before it is sent, so any number of workers send it once.

// MinNotifyAfter and MaxNotifyAfter bound the account's setting "e-mail
// reviewers when a task has waited N minutes".
const (
	MinNotifyAfter = time.Minute
	MaxNotifyAfter = 24 * time.Hour
)

// CheckNotifyAfter returns EINVALID unless d is a wait an account may set:
// whole minutes from MinNotifyAfter to MaxNotifyAfter.
func CheckNotifyAfter(d time.Duration) error {
	if d < MinNotifyAfter || d > MaxNotifyAfter || d%time.Minute != 0 {
		return Errorf(EINVALID, "Reviewers can be e-mailed after a task has waited from %d to %d whole minutes; leave it empty for never.",
			int(MinNotifyAfter.Minutes()), int(MaxNotifyAfter.Minutes()))
	}
	return nil
}

// DigestHour is the hour a digest sent at now belongs to: one digest per
// reviewer per hour.
func DigestHour(now Timestamp) int64 { return int64(now) / int64(time.Hour/time.Millisecond) }

// MaxDigestsPerRound bounds the digests one worker claims at once.
const MaxDigestsPerRound = 200

// Digest tells a reviewer how many of an account's tasks wait and how long
// the oldest has.
type Digest struct {
	AccountID, AccountName string
	PersonID, Email        string
	Waiting                int
	Oldest                 time.Duration
}

// Subject is the digest mail's subject.
func (d Digest) Subject() string {
	return fmt.Sprintf("%d %s waiting for review in %s", d.Waiting, plural(d.Waiting, "task", "tasks"), d.AccountName)
}

// Body is the digest mail's text, with the link to the queue.
func (d Digest) Body(queueURL string) string {
	return strings.Join([]string{
		"Hello,",
		"",
		fmt.Sprintf("%d %s of %s %s waiting for a person; the oldest has waited %s.", d.Waiting, plural(d.Waiting, "task", "tasks"),
			d.AccountName, plural(d.Waiting, "is", "are"), d.Oldest.Round(time.Minute)),
		"",
		"Open the queue: " + queueURL,
		"",
		"You get at most one of these an hour. An owner or admin of the account can turn them off in its settings.",
		"",
		"— Arbiter",
	}, "\r\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// MailSender sends a plain-text mail; the mail package's SMTP and log
// mailers do.
type MailSender interface {
	Send(ctx context.Context, to, subject, body string) error
}

// NotificationService finds and claims the digests due.
type NotificationService interface {
	// ClaimDigests claims, for the current hour by the store's clock, the
	// digest of every member who may review in an account that mails
	// reviewers and whose oldest waiting task has waited the account's
	// minutes, unless that digest was claimed already, and returns them, at
	// most max. A digest is claimed once however many workers ask at once.
	ClaimDigests(ctx context.Context, max int) ([]Digest, error)

	// ClaimDriftMails claims the calibration drifts not yet mailed, at
	// most max, and returns a mail for each owner and admin of their
	// accounts; each drift is claimed once however many workers ask.
	ClaimDriftMails(ctx context.Context, max int) ([]DriftMail, error)
}
