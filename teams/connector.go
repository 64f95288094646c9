package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/arbiterhq/arbiter"
)

// ClientTimeout bounds each call to the Bot Connector, and each fetch of
// the bot's token, of a Connector without an http.Client of its own. The
// Teams deliverer bounds an attempt's calls by it too, and derives its
// lease from it.
const ClientTimeout = 10 * time.Second

// Connector calls the Bot Connector of a conversation's service URL as a
// bot, with the bot's access token (Tokens).
type Connector struct {
	Tokens *Tokens
	HTTP   *http.Client
}

// APIError is the Bot Connector's answer to a call that failed.
type APIError struct {
	Status int
	// RetryAfter is how long a 429 or 503 asked to wait (0 when it did
	// not say).
	RetryAfter time.Duration
	// Code is the error's code in the body, when it has one.
	Code string
}

func (e *APIError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("the Bot Connector answered %d (%s)", e.Status, e.Code)
	}
	return fmt.Sprintf("the Bot Connector answered %d", e.Status)
}

// RetryAfter returns how long the Bot Connector asked to wait when err is
// its 429 (a second when it did not say).
func RetryAfter(err error) (time.Duration, bool) {
	var e *APIError
	if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
		return max(e.RetryAfter, time.Second), true
	}
	return 0, false
}

// Permanent reports whether err is an answer no retry mends: the bot was
// removed from the conversation, the conversation or activity is gone,
// the Bot Connector or the token service refused the credentials.
func Permanent(err error) bool {
	var e *APIError
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
			return true
		}
		return false
	}
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode/100 == 4
}

// Gone reports whether err says the activity or conversation a call named
// is no longer there (deleted in Teams): 404 or 410.
func Gone(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusGone)
}

// Send posts an activity to the conversation and returns its id, for
// Update.
func (c *Connector) Send(ctx context.Context, conn *arbiter.TeamsConnection, serviceURL, conversationID string, a *Activity) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := c.call(ctx, conn, http.MethodPost, serviceURL, "v3/conversations/"+url.PathEscape(conversationID)+"/activities", a, &out)
	return out.ID, err
}

// Update replaces the activity activityID of the conversation with a.
func (c *Connector) Update(ctx context.Context, conn *arbiter.TeamsConnection, serviceURL, conversationID, activityID string, a *Activity) error {
	a.ID = activityID
	return c.call(ctx, conn, http.MethodPut, serviceURL,
		"v3/conversations/"+url.PathEscape(conversationID)+"/activities/"+url.PathEscape(activityID), a, nil)
}

// Member is a conversation member as the Bot Connector describes a Teams
// user.
type Member struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	AADObjectID       string `json:"aadObjectId"`
	Email             string `json:"email"`
	UserPrincipalName string `json:"userPrincipalName"`
}

// Address returns the member's e-mail address, or their user principal
// name when it reads as one, lower-cased; "" when neither does.
func (m *Member) Address() string {
	for _, a := range []string{m.Email, m.UserPrincipalName} {
		if a = strings.ToLower(strings.TrimSpace(a)); strings.Count(a, "@") == 1 && !strings.HasPrefix(a, "@") && !strings.HasSuffix(a, "@") {
			return a
		}
	}
	return ""
}

// Member returns the member userID of the conversation.
func (c *Connector) Member(ctx context.Context, conn *arbiter.TeamsConnection, serviceURL, conversationID, userID string) (*Member, error) {
	var m Member
	err := c.call(ctx, conn, http.MethodGet, serviceURL,
		"v3/conversations/"+url.PathEscape(conversationID)+"/members/"+url.PathEscape(userID), nil, &m)
	return &m, err
}

// maxConnectorAnswer bounds what is read of an answer.
const maxConnectorAnswer = 1 << 20

// call makes one Bot Connector call with the bot's token, encoding in
// and decoding the answer into out.
func (c *Connector) call(ctx context.Context, conn *arbiter.TeamsConnection, method, serviceURL, path string, in, out any) error {
	token, err := c.Tokens.Token(conn.TenantID, conn.AppID, conn.ClientSecret)
	if err != nil {
		return &tokenError{err}
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(serviceURL, "/")+"/"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: ClientTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxConnectorAnswer))
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &body) == nil {
			e.Code = body.Error.Code
		}
		return e
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("read the Bot Connector's answer: %w", err)
		}
	}
	return nil
}

// tokenError is a failure to get the bot's access token: the token
// service refused the credentials, or could not be reached.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return "get the bot's access token: " + e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }
