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
	// Tasks are the oldest waiting tasks, with this person's decision
	// links (decisionlink.go).
	Tasks []DigestTask
}

// Subject is the digest mail's subject.
func (d Digest) Subject() string {
	return fmt.Sprintf("%d %s waiting for review in %s", d.Waiting, plural(d.Waiting, "task", "tasks"), d.AccountName)
}

// Body is the digest mail's text, with the link to the queue and, for
// each of the oldest tasks, a decision link per verdict
// (queueURL/links/TOKEN), which opens a page to confirm.
func (d Digest) Body(queueURL string) string {
	lines := []string{
		"Hello,",
		"",
		fmt.Sprintf("%d %s of %s %s waiting for a person; the oldest has waited %s.", d.Waiting, plural(d.Waiting, "task", "tasks"),
			d.AccountName, plural(d.Waiting, "is", "are"), d.Oldest.Round(time.Minute)),
		"",
		"Open the queue: " + queueURL,
		"",
	}
	if len(d.Tasks) > 0 {
		lines = append(lines, QuotedFrom(d.AccountName), "")
	}
	for _, t := range d.Tasks {
		prompt := []rune(strings.Join(strings.Fields(t.Prompt), " "))
		if len(prompt) > 120 {
			prompt = append(prompt[:119], '…')
		}
		lines = append(lines, "“"+string(prompt)+"”")
		if a := t.Action; a != nil {
			lines = append(lines, "  action: "+a.Name+" "+truncateText(string(a.Args), 200)+" (digest "+ShortDigest(a.Digest)+")")
		}
		for _, l := range t.Links {
			lines = append(lines, "  "+l.Verdict+": "+queueURL+"/links/"+l.Token)
		}
		if len(t.Links) == 0 {
			lines = append(lines, "  "+queueURL+"/tasks/"+t.TaskID)
		}
		lines = append(lines, "")
	}
	if len(d.Tasks) > 0 {
		lines = append(lines, "Each link is yours alone and decides once, after you confirm; it expires with the task's deadline or in 7 days.", "")
	}
	return strings.Join(append(lines,
		"You get at most one of these an hour. An owner or admin of the account can turn them off in its settings.",
		"",
		"— Arbiter",
	), "\r\n")
}

// QuotedFrom is the line of a mail that quotes a task's text, saying
// whose it is: the account's API callers wrote it, not Arbiter.
func QuotedFrom(accountName string) string {
	return "Quoted from the Arbiter account " + accountName + ": its API callers wrote this text, not Arbiter."
}

// truncateText cuts s to at most n characters, marking the cut.
func truncateText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
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

// NotificationService queues the digests and drift mails due.
type NotificationService interface {
	// ClaimDigests claims, for the current hour by the store's clock, the
	// digest of every member who may review in an account that mails
	// reviewers and whose oldest waiting task has waited the account's
	// minutes, unless that digest was claimed already, and queues each
	// in the mail outbox, at most max; it returns how many it queued. A
	// digest is claimed once however many workers ask at once.
	ClaimDigests(ctx context.Context, max int) (int, error)

	// ClaimDriftMails claims the calibration drifts not yet mailed, at
	// most max, and queues a mail for each owner and admin of their
	// accounts in the mail outbox; it returns how many mails it queued.
	// Each drift is claimed once however many workers ask.
	ClaimDriftMails(ctx context.Context, max int) (int, error)
}
