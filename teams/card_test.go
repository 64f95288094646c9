package teams_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/teams"
)

const desk = "https://review.example.com/review/tasks/tsk_0123456789abcdef"

func routed(prompt string) *arbiter.Task {
	v, c := "approve", 0.61
	deadline := arbiter.Timestamp(1_900_000_000_000)
	return &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: prompt,
		AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8, DeadlineAt: &deadline,
		Context:  json.RawMessage(`{"customer":"Ann **bold** [x](https://evil.example)","amount":12}`),
		Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Verdict: &v, Confidence: &c}}}
}

// cardJSON is the card as Teams gets it, decoded generically.
func cardJSON(t *testing.T, c teams.Card) (string, map[string]any) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return string(b), m
}

// TestQuestion_BaseCard: the posted card is an Adaptive Card 1.5 with the
// prompt, the context's fields, the deadline as Teams localizes it, the
// verifier's verdict and confidence, the status, refresh with the
// deciders' ids, one "Decide" that asks for a person's own view, and a
// link to the desk; what callers wrote is in text runs, never Markdown.
func TestQuestion_BaseCard(t *testing.T) {
	task := routed("Refund **order** 1234 <at>everyone</at>?")
	raw, m := cardJSON(t, teams.Question(task, desk, []string{"29:ann", "29:bob"}, teams.Personal{}))
	if m["type"] != "AdaptiveCard" || m["version"] != "1.5" {
		t.Fatalf("not an Adaptive Card 1.5: %s", raw)
	}
	for _, want := range []string{`"text":"Refund **order** 1234 \u003cat\u003eeveryone\u003c/at\u003e?"`, `"text":"customer: "`,
		`Ann **bold** [x](https://evil.example)`, `{{DATE(2030-03-17T17:46:40Z, SHORT)}}`, `"text":"approve","weight":"Bolder"`,
		`at 0.61 confidence (threshold 0.80)`, `"userIds":["29:ann","29:bob"]`, `"verb":"view"`, `"url":"` + desk + `"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("the card lacks %s:\n%s", want, raw)
		}
	}
	var verbs []string
	for _, a := range m["actions"].([]any) {
		if v, ok := a.(map[string]any)["verb"]; ok {
			verbs = append(verbs, v.(string))
		}
	}
	if strings.Join(verbs, ",") != "view" {
		t.Errorf("the base card's actions %v, want one Decide (view)", verbs)
	}
	for _, b := range m["body"].([]any) {
		if block := b.(map[string]any); block["type"] == "TextBlock" && strings.Contains(block["text"].(string), "Refund") {
			t.Errorf("the prompt is in a TextBlock, read as Markdown: %v", block)
		}
	}
}

// TestQuestion_DecidersView: a person who may decide sees one button per
// verdict, carrying the task and the verdict, and the reason field; past
// five verdicts, a choice and one button.
func TestQuestion_DecidersView(t *testing.T) {
	task := routed("Refund?")
	_, m := cardJSON(t, teams.Question(task, desk, nil, teams.Personal{Decide: true}))
	var decided []string
	for _, a := range m["actions"].([]any) {
		if a := a.(map[string]any); a["verb"] == teams.VerbDecide {
			data := a["data"].(map[string]any)
			if data["taskId"] != task.ID {
				t.Errorf("a button for another task: %v", a)
			}
			decided = append(decided, data["verdict"].(string))
		}
	}
	if strings.Join(decided, ",") != "approve,reject" {
		t.Errorf("buttons %v, want one per verdict", decided)
	}
	raw, _ := cardJSON(t, teams.Question(task, desk, nil, teams.Personal{Decide: true}))
	if !strings.Contains(raw, `"type":"Input.Text","id":"reason"`) {
		t.Errorf("no reason field:\n%s", raw)
	}
	for i := range 6 {
		task.AllowedVerdicts = append(task.AllowedVerdicts, fmt.Sprintf("v%d", i))
	}
	raw, m = cardJSON(t, teams.Question(task, desk, nil, teams.Personal{Decide: true}))
	if !strings.Contains(raw, `"type":"Input.ChoiceSet","id":"verdict"`) || strings.Count(raw, `"verb":"decide"`) != 1 {
		t.Errorf("eight verdicts, want a choice and one button:\n%s", raw)
	}
}

// TestQuestion_BlindHidesTheVerifier: a blind audit and a task waiting
// for votes show neither the verifier's verdict nor its confidence.
func TestQuestion_BlindHidesTheVerifier(t *testing.T) {
	audit := routed("Audit?")
	audit.Status, audit.AuditState = arbiter.StatusCompleted, arbiter.AuditStateWaiting
	vote := routed("Vote?")
	vote.Review = &arbiter.ReviewRequirement{ReviewsRequired: 2}
	for name, task := range map[string]*arbiter.Task{"Audit": audit, "Vote": vote} {
		for _, p := range []teams.Personal{{}, {Decide: true}} {
			raw, m := cardJSON(t, teams.Question(task, desk, nil, p))
			if !strings.Contains(raw, "Blind") {
				t.Errorf("%s: the card does not say it is blind", name)
			}
			body, _ := json.Marshal(m["body"])
			for _, leak := range []string{"0.61", "confidence", "Verifier", `"approve"`} {
				if strings.Contains(string(body), leak) {
					t.Errorf("%s: the card's body shows %q:\n%s", name, leak, body)
				}
			}
		}
	}
}

// TestQuestion_FitsTeamsLimits: a long prompt, many long fields and a
// hundred deciders stay within Teams' message size, keep sixty deciders
// and say what was cut.
func TestQuestion_FitsTeamsLimits(t *testing.T) {
	fields := map[string]string{}
	for i := range 40 {
		fields[fmt.Sprintf("field%02d", i)] = strings.Repeat("é", 5000)
	}
	ctx, _ := json.Marshal(fields)
	task := routed(strings.Repeat("x", 50_000))
	task.Context = ctx
	var deciders []string
	for i := range 100 {
		deciders = append(deciders, fmt.Sprintf("29:user-%03d", i))
	}
	raw, m := cardJSON(t, teams.Question(task, desk, deciders, teams.Personal{Decide: true}))
	if len(raw) > 24<<10 {
		t.Errorf("a card of %d bytes, over 24 KiB", len(raw))
	}
	if n := len(m["refresh"].(map[string]any)["userIds"].([]any)); n != teams.MaxRefreshUsers {
		t.Errorf("%d deciders kept, want %d", n, teams.MaxRefreshUsers)
	}
	if !strings.Contains(raw, "open it in the desk for the rest") {
		t.Error("the card does not say it was cut")
	}
}

// TestOutcome: an ended task's card says how it ended and by whom,
// without buttons or refresh.
func TestOutcome(t *testing.T) {
	task := routed("Refund?")
	reject, ann, human := "reject", "ann@example.com", arbiter.TierHuman
	at := arbiter.Timestamp(1_900_000_000_000)
	task.Status, task.FinalVerdict, task.FinalTier, task.CompletedAt = arbiter.StatusCompleted, &reject, &human, &at
	task.Attempts = append(task.Attempts, arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: &reject, Reviewer: &ann})
	raw, m := cardJSON(t, teams.Outcome(task, desk))
	if !strings.Contains(raw, `"text":"reject","weight":"Bolder"`) || !strings.Contains(raw, `"text":"ann@example.com"`) {
		t.Errorf("the outcome:\n%s", raw)
	}
	if _, ok := m["refresh"]; ok || strings.Contains(raw, "Action.Execute") {
		t.Errorf("an ended card keeps buttons or refresh:\n%s", raw)
	}
}
