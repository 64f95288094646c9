package slack_test

import (
	"context"
	"testing"

	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
)

// TestClient_RespondsToSlackOnly: an interaction's response_url is
// answered only on Slack's hosts (or the Web API's own, a proxy's or a
// fake's): a payload naming another address sends nothing there.
func TestClient_RespondsToSlackOnly(t *testing.T) {
	fake := slackfake.New(t)
	c := slack.NewClient(fake.URL, nil)
	if err := c.Respond(context.Background(), fake.ResponseURL, "ok"); err != nil {
		t.Fatalf("the fake's own response URL: %v", err)
	}
	for _, u := range []string{"http://127.0.0.2:9/hook", "https://hooks.slack.com.evil.example/x", "http://hooks.slack.com/x"} {
		if err := c.Respond(context.Background(), u, "no"); err == nil {
			t.Errorf("responded to %s", u)
		}
	}
	if n := len(fake.Calls("response")); n != 1 {
		t.Errorf("%d responses, want 1", n)
	}
}
