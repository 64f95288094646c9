package slack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/slack"
)

// TestQuestion_FitsSlacksLimits: a long prompt, many context fields and
// many verdicts stay within Slack's limits (50 blocks, 3,000 characters a
// section, 10 fields), what was cut links to the desk, and past five
// verdicts the buttons become one select menu whose options carry the
// task and the verdict.
func TestQuestion_FitsSlacksLimits(t *testing.T) {
	ctxFields := map[string]string{}
	for i := range 30 {
		ctxFields[fmt.Sprintf("field%02d", i)] = strings.Repeat("v", 5000)
	}
	raw, _ := json.Marshal(ctxFields)
	var verdicts []string
	for i := range 8 {
		verdicts = append(verdicts, fmt.Sprintf("verdict-%d", i))
	}
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: strings.Repeat("é", 10000),
		AllowedVerdicts: verdicts, Context: raw}
	const desk = "https://review.example.com/review/tasks/tsk_0123456789abcdef"
	msg := slack.Question(task, desk)
	if len(msg.Blocks) > slack.MaxBlocks {
		t.Fatalf("%d blocks", len(msg.Blocks))
	}
	out, _ := json.Marshal(msg.Blocks)
	var blocks []struct {
		Type     string                  `json:"type"`
		Text     *struct{ Text string }  `json:"text"`
		Fields   []struct{ Text string } `json:"fields"`
		Elements []struct {
			Type     string                   `json:"type"`
			ActionID string                   `json:"action_id"`
			Options  []struct{ Value string } `json:"options"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(out, &blocks); err != nil {
		t.Fatal(err)
	}
	var selects int
	for _, b := range blocks {
		if b.Text != nil && utf8.RuneCountInString(b.Text.Text) > slack.MaxSectionChars {
			t.Errorf("a section of %d characters", utf8.RuneCountInString(b.Text.Text))
		}
		if len(b.Fields) > 10 {
			t.Errorf("%d fields", len(b.Fields))
		}
		for _, f := range b.Fields {
			if utf8.RuneCountInString(f.Text) > 2000 {
				t.Errorf("a field of %d characters", utf8.RuneCountInString(f.Text))
			}
		}
		for _, e := range b.Elements {
			if e.Type == "static_select" && e.ActionID == slack.ActionDecide {
				selects++
				if len(e.Options) != 8 || e.Options[3].Value != slack.EncodeValue(task.ID, "", "verdict-3") {
					t.Errorf("the select's options: %+v", e.Options)
				}
			}
		}
	}
	if selects != 1 {
		t.Errorf("%d select menus, want 1 past %d verdicts", selects, slack.MaxButtons)
	}
	if !strings.Contains(blocks[0].Text.Text, "<"+desk+"|Open in the desk>") {
		t.Error("the cut prompt does not link to the desk")
	}
	if !strings.Contains(string(out), "for the rest") {
		t.Error("the cut context does not link to the desk")
	}
	// The modal is valid for Slack's library (unique block ids).
	if !slackgo.ValidateUniqueBlockID(slack.ReasonModal(task, "", "")) {
		t.Error("the reason modal's block ids are not unique")
	}
}

func TestDecodeValue(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, d := range []string{"", digest} {
		id, gotDigest, v, ok := slack.DecodeValue(slack.EncodeValue("tsk_0123456789abcdef", d, "a|b@c"))
		if !ok || id != "tsk_0123456789abcdef" || gotDigest != d || v != "a|b@c" {
			t.Errorf("round trip with digest %q = %q %q %q %v", d, id, gotDigest, v, ok)
		}
	}
	// A value from before actions has no digest.
	if id, d, v, ok := slack.DecodeValue("tsk_0123456789abcdef|approve"); !ok || id != "tsk_0123456789abcdef" || d != "" || v != "approve" {
		t.Errorf("an old value = %q %q %q %v", id, d, v, ok)
	}
	for _, bad := range []string{"", "tsk_0123456789abcdef", "tsk_0123456789abcdef|", "https://x|approve", "nope|approve", "nope@ab|approve"} {
		if _, _, _, ok := slack.DecodeValue(bad); ok {
			t.Errorf("DecodeValue(%q) ok", bad)
		}
	}
}

// TestQuestion_BlindVoteAndDeadlineOutcome: a task that asks two people to
// vote is blind in Slack as on the desk (no verdict, no confidence in the
// JSON), and a deadline with an on-expiry outcome says what it does.
func TestQuestion_BlindVoteAndDeadlineOutcome(t *testing.T) {
	verdict, confidence := "approve_secret_verdict", 0.42
	deadline := arbiter.Timestamp(1_795_000_000_000)
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Refund?",
		AllowedVerdicts: []string{"approve_secret_verdict", "reject"}, ConfidenceThreshold: 0.9, DeadlineAt: &deadline,
		Review:   &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous},
		OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"},
		Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence}}}
	if !task.Blind() {
		t.Fatal("a two-vote task waiting for votes is not blind: the test checks nothing")
	}
	out, _ := json.Marshal(slack.Question(task, "https://review.example.com/review/tasks/tsk_0123456789abcdef").Blocks)
	body := string(out)
	if strings.Contains(body, "0.42") || strings.Contains(body, "Verifier:") {
		t.Errorf("a blind vote's message shows the verifier's answer: %s", body)
	}
	if !strings.Contains(body, "Blind vote") || !strings.Contains(body, "unless decided, reject") {
		t.Errorf("the message does not say it is a blind vote, or what happens at the deadline: %s", body)
	}
}

// An escalated task's question, posted again at the rung, says whom it
// went to and when; a task not escalated says nothing of it.
func TestQuestion_SaysWhomAnEscalatedTaskWentTo(t *testing.T) {
	at := arbiter.Timestamp(1_795_000_000_000)
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Refund?",
		AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.9}
	question := func() string {
		out, err := json.Marshal(slack.Question(task, "https://review.example.com/review/tasks/tsk_0123456789abcdef").Blocks)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if body := question(); strings.Contains(body, "Escalated") {
		t.Errorf("a task not escalated says it was: %s", body)
	}
	task.Escalation = &arbiter.TaskEscalation{Rung: 1, After: "30m", To: "role:admin", EscalatedAt: at}
	if body := question(); !strings.Contains(body, "*Escalated to admins*") || !strings.Contains(body, "after waiting 30m") {
		t.Errorf("an escalated task's question does not say whom it went to: %s", body)
	}
}

// TestQuestion_NotificationTextEscapesMrkdwn: the notification text
// beside the blocks is mrkdwn too, so a prompt that holds Slack's
// mentions and links (<!channel>, <!here>, <@U…>, <url|label>) or a bare
// & notifies nobody and links nowhere: every &, < and > is escaped, and a
// long prompt is cut before it is escaped, never inside an escape.
func TestQuestion_NotificationTextEscapesMrkdwn(t *testing.T) {
	for name, c := range map[string]struct {
		prompt string
		want   string
	}{
		"Channel":  {"<!channel> refund?", "Decision needed: &lt;!channel&gt; refund?"},
		"Here":     {"<!here|here> now", "Decision needed: &lt;!here|here&gt; now"},
		"User":     {"ask <@U024BE7LH>", "Decision needed: ask &lt;@U024BE7LH&gt;"},
		"Link":     {"see <https://evil.example|the desk>", "Decision needed: see &lt;https://evil.example|the desk&gt;"},
		"Amp":      {"Q&A &lt; 5", "Decision needed: Q&amp;A &amp;lt; 5"},
		"CutFirst": {strings.Repeat("x", 270) + strings.Repeat("<", 40), "Decision needed: " + strings.Repeat("x", 270) + strings.Repeat("&lt;", 12) + "…"},
	} {
		t.Run(name, func(t *testing.T) {
			task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: c.prompt,
				AllowedVerdicts: []string{"approve", "reject"}}
			got := slack.Question(task, "https://review.example.com/review/tasks/tsk_0123456789abcdef").Text
			if got != c.want {
				t.Errorf("text %q, want %q", got, c.want)
			}
			if strings.ContainsAny(got, "<>") {
				t.Errorf("text %q holds markup", got)
			}
		})
	}
}
