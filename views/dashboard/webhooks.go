package dashboard

import (
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
)

// WebhooksView is the webhooks page: the account's endpoints, the create
// form and the callback secret.
type WebhooksView struct {
	Endpoints []*arbiter.WebhookEndpoint
	// Callback is the account's callback secret; RevealCallback shows it.
	Callback       *arbiter.CallbackSecret
	RevealCallback bool
	// Form and Error echo a refused create form.
	Form  arbiter.WebhookEndpointInput
	Error string
	// Notice confirms what was just done.
	Notice string
	// AllowHTTP says http:// URLs are allowed (development).
	AllowHTTP bool
	Now       time.Time
}

// WebhookView is one endpoint's page with its delivery log.
type WebhookView struct {
	Endpoint *arbiter.WebhookEndpoint
	// Messages are its latest messages, newest first, with Status the
	// filter that chose them ("" for all).
	Messages []*arbiter.WebhookMessage
	Status   string
	// Reveal shows the endpoint's signing secrets.
	Reveal bool
	// Notice confirms what was just done; Error says what was refused.
	Notice, Error string
	// Since is the resend form's starting value (UTC, datetime-local).
	Since string
	// Edit and EditError echo a refused change of the endpoint; with no
	// Edit the change form shows the endpoint as it is.
	Edit      *arbiter.WebhookEndpointInput
	EditError string
	// AllowHTTP says http:// URLs are allowed (development).
	AllowHTTP bool
	Now       time.Time
}

// editForm is what the endpoint's change form shows.
func editForm(v WebhookView) arbiter.WebhookEndpointInput {
	if v.Edit != nil {
		return *v.Edit
	}
	return arbiter.WebhookEndpointInput{URL: v.Endpoint.URL, Description: v.Endpoint.Description, EventTypes: v.Endpoint.EventTypes}
}

// WebhookMessageView is one message with its attempts.
type WebhookMessageView struct {
	Endpoint *arbiter.WebhookEndpoint
	Message  *arbiter.WebhookMessage
	Attempts []arbiter.WebhookAttempt
	Now      time.Time
}

// SinceLayout is the form of a datetime-local input, read as UTC.
const SinceLayout = "2006-01-02T15:04"

// eventTypesLabel names what an endpoint subscribes to.
func eventTypesLabel(e *arbiter.WebhookEndpoint) string {
	if len(e.EventTypes) == 0 {
		return "all events"
	}
	return strings.Join(e.EventTypes, ", ")
}

// disabledLabel says why an endpoint receives nothing.
func disabledLabel(reason string) string {
	switch reason {
	case arbiter.WebhookDisabledGone:
		return "Disabled: it answered 410 Gone"
	case arbiter.WebhookDisabledFailing:
		return "Disabled: every delivery failed for 5 days"
	}
	return "Disabled"
}

// messageStatusColour is the badge colour of a message status.
func messageStatusColour(status string) string {
	switch status {
	case arbiter.WebhookDelivered:
		return "green"
	case arbiter.WebhookFailed:
		return "red"
	case arbiter.WebhookHeld:
		return "slate"
	}
	return "amber"
}

// statusCodeLabel shows an attempt's status code, or a dash without one.
func statusCodeLabel(code int) string {
	if code == 0 {
		return "–"
	}
	return strconv.Itoa(code)
}

// latencyLabel shows a latency in milliseconds.
func latencyLabel(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }

// wantsType reports whether the form has the event type ticked: all are
// when none is.
func wantsType(in arbiter.WebhookEndpointInput, t string) bool {
	if len(in.EventTypes) == 0 {
		return true
	}
	for _, v := range in.EventTypes {
		if v == t {
			return true
		}
	}
	return false
}

// filterLink is the delivery log filtered by status.
func filterLink(e *arbiter.WebhookEndpoint, status string) string {
	if status == "" {
		return "/webhooks/" + e.ID
	}
	return "/webhooks/" + e.ID + "?status=" + status
}
