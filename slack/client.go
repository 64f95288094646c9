// Package slack is Arbiter's side of Slack: the Web API calls it makes
// (through github.com/slack-go/slack), the Block Kit messages it posts,
// the verification of the interactions Slack sends back, and Socket Mode.
// It depends on the root package only; the store and the decision rules
// come in through its interfaces.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = slackgo.APIURL

// Client calls Slack's Web API with one account's tokens.
type Client struct {
	apiURL string
	// apiHost is the Web API's host: response URLs on it are Slack's too
	// (a proxy's, a fake's).
	apiHost string
	hc      *http.Client
}

// ClientTimeout bounds each Web API call of a client NewClient makes
// without an http.Client of its own. The Slack deliverer bounds an
// attempt's calls by it too, and derives its lease from it.
const ClientTimeout = 10 * time.Second

// NewClient returns a client of the Web API at apiURL ("" for Slack's),
// which tests point at a fake, through hc (nil for a client whose calls
// are bounded by ClientTimeout).
func NewClient(apiURL string, hc *http.Client) *Client {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	if hc == nil {
		hc = &http.Client{Timeout: ClientTimeout}
	}
	c := &Client{apiURL: apiURL, hc: hc}
	if u, err := url.Parse(apiURL); err == nil {
		c.apiHost = u.Host
	}
	return c
}

// API returns the library's client for a bot token, and an app-level
// token for Socket Mode when appToken is not "".
func (c *Client) API(botToken, appToken string) *slackgo.Client {
	opts := []slackgo.Option{slackgo.OptionAPIURL(c.apiURL), slackgo.OptionHTTPClient(c.hc)}
	if appToken != "" {
		opts = append(opts, slackgo.OptionAppLevelToken(appToken))
	}
	return slackgo.New(botToken, opts...)
}

// TeamOf checks a bot token (auth.test) and returns its workspace's id.
func (c *Client) TeamOf(ctx context.Context, botToken string) (string, error) {
	r, err := c.API(botToken, "").AuthTestContext(ctx)
	if err != nil {
		return "", err
	}
	return r.TeamID, nil
}

// Post posts msg to channel and returns where Slack put it: the channel's
// id and the message's ts, for Update. The message carries its outbox
// row's id and its task's in its metadata (MetadataEvent), by which
// FindPost finds it when its answer was lost.
func (c *Client) Post(ctx context.Context, botToken, channel, messageID, taskID string, msg Message) (channelID, ts string, err error) {
	return c.API(botToken, "").PostMessageContext(ctx, channel,
		slackgo.MsgOptionText(msg.Text, false), slackgo.MsgOptionBlocks(msg.Blocks...),
		slackgo.MsgOptionMetadata(slackgo.SlackMetadata{EventType: MetadataEvent,
			EventPayload: map[string]any{"message_id": messageID, "task_id": taskID}}))
}

// MetadataEvent is the event type of the metadata of Arbiter's posts.
const MetadataEvent = "arbiter_question"

// Bounds of the searches for a post whose answer was lost: the history
// from a minute before the attempt began (clocks differ), and the
// channels of the workspace, each a page at a time.
const (
	historySlack   = time.Minute
	historyPage    = 200
	maxHistoryRead = 10 // pages: 2,000 messages since the attempt
	channelsPage   = 1000
	maxChannelRead = 20 // pages: 20,000 channels
)

// FindPost looks through the channel's history since the time an attempt
// at the post began for the message whose metadata names messageID, and
// returns its ts, or "" when it is not there: the attempt did not post
// it. channelID is the channel's id (conversations.history takes no
// name).
func (c *Client) FindPost(ctx context.Context, botToken, channelID string, since time.Time, messageID string) (string, error) {
	api := c.API(botToken, "")
	oldest := since.Add(-historySlack)
	params := &slackgo.GetConversationHistoryParameters{ChannelID: channelID, Limit: historyPage, IncludeAllMetadata: true,
		Oldest: strconv.FormatInt(oldest.Unix(), 10) + "." + fmt.Sprintf("%06d", oldest.Nanosecond()/1000)}
	for range maxHistoryRead {
		page, err := api.GetConversationHistoryContext(ctx, params)
		if err != nil {
			return "", err
		}
		for _, m := range page.Messages {
			if m.Metadata.EventType == MetadataEvent && m.Metadata.EventPayload["message_id"] == messageID {
				return m.Timestamp, nil
			}
		}
		if !page.HasMore || page.ResponseMetaData.NextCursor == "" {
			return "", nil
		}
		params.Cursor = page.ResponseMetaData.NextCursor
	}
	return "", errors.New("the channel's history since the attempt is longer than Arbiter reads")
}

// ChannelIDOf returns the id of the channel named channel: itself when it
// is an id, else the id of the public or private channel of that name
// the app can see (conversations.list), or "" when there is none.
func (c *Client) ChannelIDOf(ctx context.Context, botToken, channel string) (string, error) {
	name, isName := strings.CutPrefix(channel, "#")
	if !isName {
		return channel, nil
	}
	api := c.API(botToken, "")
	params := &slackgo.GetConversationsParameters{Types: []string{"public_channel", "private_channel"},
		ExcludeArchived: true, Limit: channelsPage}
	for range maxChannelRead {
		channels, cursor, err := api.GetConversationsContext(ctx, params)
		if err != nil {
			return "", err
		}
		for _, ch := range channels {
			if ch.Name == name {
				return ch.ID, nil
			}
		}
		if cursor == "" {
			return "", nil
		}
		params.Cursor = cursor
	}
	return "", errors.New("the workspace has more channels than Arbiter reads")
}

// Update replaces the message at channelID and ts with msg.
func (c *Client) Update(ctx context.Context, botToken, channelID, ts string, msg Message) error {
	_, _, _, err := c.API(botToken, "").UpdateMessageContext(ctx, channelID, ts,
		slackgo.MsgOptionText(msg.Text, false), slackgo.MsgOptionBlocks(msg.Blocks...))
	return err
}

// VerifiedEmail returns the e-mail address of a Slack user (users.info,
// with users:read.email), or "" when Slack has not confirmed it.
func (c *Client) VerifiedEmail(ctx context.Context, botToken, userID string) (string, error) {
	u, err := c.API(botToken, "").GetUserInfoContext(ctx, userID)
	if err != nil {
		return "", err
	}
	if !u.IsEmailConfirmed || u.Deleted || u.IsBot {
		return "", nil
	}
	return strings.ToLower(strings.TrimSpace(u.Profile.Email)), nil
}

// Respond answers an interaction through its response_url: ephemeral,
// seen only by the person who clicked.
func (c *Client) Respond(ctx context.Context, responseURL, text string) error {
	if responseURL == "" {
		return nil
	}
	// The URL comes in a verified payload; still, answer Slack only.
	u, err := url.Parse(responseURL)
	if err != nil || !(u.Host == c.apiHost || u.Scheme == "https" && strings.HasSuffix(u.Hostname(), ".slack.com")) {
		return errors.New("the response_url is not Slack's")
	}
	return slackgo.PostWebhookCustomHTTPContext(ctx, responseURL, c.hc, &slackgo.WebhookMessage{
		Text: text, ResponseType: slackgo.ResponseTypeEphemeral})
}

// OpenReason opens the "Add a reason" modal for the task.
func (c *Client) OpenReason(ctx context.Context, botToken, triggerID string, view slackgo.ModalViewRequest) error {
	_, err := c.API(botToken, "").OpenViewContext(ctx, triggerID, view)
	return err
}

// RetryAfter returns how long Slack asked to wait when err is its 429.
func RetryAfter(err error) (time.Duration, bool) {
	var rl *slackgo.RateLimitedError
	if errors.As(err, &rl) {
		d := rl.RetryAfter
		if d <= 0 {
			d = time.Second
		}
		return d, true
	}
	return 0, false
}

// permanentErrors are Slack's answers that no retry mends.
var permanentErrors = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "invalid_auth": true,
	"account_inactive": true, "token_revoked": true, "not_authed": true, "missing_scope": true,
	"msg_too_long": true, "invalid_blocks": true, "message_not_found": true, "cant_update_message": true,
}

// Refused reports whether err is Slack's answer that it did not do what
// it was asked (ok: false, or 429), rather than a failure that leaves
// the outcome unknown (a timeout, a dropped connection, a 5xx).
func Refused(err error) bool {
	var se slackgo.SlackErrorResponse
	var rl *slackgo.RateLimitedError
	return errors.As(err, &se) || errors.As(err, &rl)
}

// MissingScope reports whether err is Slack's refusal for a scope the
// app was not granted.
func MissingScope(err error) bool {
	var se slackgo.SlackErrorResponse
	return errors.As(err, &se) && se.Err == "missing_scope" || err != nil && err.Error() == "missing_scope"
}

// Permanent reports whether err is an answer of Slack's that no retry
// mends (a channel the app is not in, a revoked token, a bad message).
func Permanent(err error) bool {
	var se slackgo.SlackErrorResponse
	if errors.As(err, &se) {
		return permanentErrors[se.Err]
	}
	return permanentErrors[err.Error()]
}

// Unreachable says in a few words, for a person, why a call Slack did not
// answer with its own refusal failed: "it did not answer in time", "it
// answered HTTP 503", "the connection failed". It never names an address
// or repeats a token.
func Unreachable(err error) string {
	var status slackgo.StatusCodeError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &status):
		return fmt.Sprintf("it answered HTTP %d", status.Code)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return "it did not answer in time"
	}
	return "the connection failed"
}
