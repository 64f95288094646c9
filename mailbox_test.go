package arbiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestMailCompose_QuotingMailSaysWhoseAccountItQuotes: every mail of the
// outbox that quotes a task's text, as the deliverer renders it from its
// row, says which account's callers wrote the text; the kinds that quote
// are the ones counted against the account's daily bound (QuotesCaller).
func TestMailCompose_QuotingMailSaysWhoseAccountItQuotes(t *testing.T) {
	const prompt = "Wire 9,000 EUR to the account in the attachment?"
	alert := arbiter.AlertMail{AccountName: "acme@example.com", TaskID: "tsk_1", Prompt: prompt, Waited: time.Hour}
	escalated := alert
	escalated.Kind = arbiter.AlertEscalation
	escalated.Escalation = &arbiter.TaskEscalation{Rung: 1, To: "role:admin"}
	reminder := alert
	reminder.Kind = arbiter.AlertReminder
	digest := arbiter.Digest{AccountName: "acme@example.com", Email: "rev@example.com", Waiting: 1, Oldest: time.Hour,
		Tasks: []arbiter.DigestTask{{TaskID: "tsk_1", Prompt: prompt}}}
	disabled := arbiter.WebhookDisabledMail{EndpointID: "whe_1", URL: "https://hooks.example.com/arbiter", Reason: arbiter.WebhookDisabledGone}
	drift := arbiter.DriftMail{Drift: arbiter.Drift{TaskType: "refund", Audits: 50, Errors: 9, Target: 0.05, Confidence: 0.95},
		AccountName: "acme@example.com", Email: "owner@example.com"}
	for _, tc := range []struct {
		kind    string
		content any
		quotes  bool
	}{
		{arbiter.MailReminder, reminder, true},
		{arbiter.MailEscalation, escalated, true},
		{arbiter.MailDigest, digest, true},
		{arbiter.MailDrift, drift, false},
		{arbiter.MailWebhookDisabled, disabled, false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			m, err := arbiter.NewMail(tc.kind, "acc_1", "rev@example.com", "tsk_1", tc.content)
			if err != nil {
				t.Fatal(err)
			}
			_, body, err := m.Compose(arbiter.MailLinks{QueueURL: "https://review.example.com/review"})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(body, prompt); got != tc.quotes {
				t.Fatalf("quotes the task's text: %v, want %v:\n%s", got, tc.quotes, body)
			}
			says := strings.Contains(body, "Quoted from the Arbiter account acme@example.com: its API callers wrote this text")
			if says != tc.quotes {
				t.Errorf("says whose account the text is from: %v, want %v:\n%s", says, tc.quotes, body)
			}
			if arbiter.QuotesCaller(tc.kind) != tc.quotes {
				t.Errorf("QuotesCaller(%q) = %v, want %v", tc.kind, arbiter.QuotesCaller(tc.kind), tc.quotes)
			}
		})
	}
}

// TestWebhookDisabledMail_SaysWhichEndpointAndWhy: the notice of a
// disabled endpoint, as the mail deliverer renders it from its row, names
// the endpoint's URL and the reason it was disabled.
func TestWebhookDisabledMail_SaysWhichEndpointAndWhy(t *testing.T) {
	for _, tc := range []struct{ reason, why string }{
		{arbiter.WebhookDisabledGone, "it answered 410 Gone"},
		{arbiter.WebhookDisabledFailing, "every delivery to it has failed for 5 days"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			content := arbiter.WebhookDisabledMail{EndpointID: "whe_1", URL: "https://hooks.example.com/arbiter", Reason: tc.reason}
			m, err := arbiter.NewMail(arbiter.MailWebhookDisabled, "acc_1", "owner@example.com", "", content)
			if err != nil {
				t.Fatal(err)
			}
			subject, body, err := m.Compose(arbiter.MailLinks{})
			if err != nil {
				t.Fatal(err)
			}
			if subject != "Arbiter disabled a webhook endpoint" {
				t.Errorf("subject %q", subject)
			}
			for _, want := range []string{"because " + tc.why, "\r\nhttps://hooks.example.com/arbiter\r\n", "enable it on the Webhooks page"} {
				if !strings.Contains(body, want) {
					t.Errorf("the body does not say %q:\n%s", want, body)
				}
			}
		})
	}
}
