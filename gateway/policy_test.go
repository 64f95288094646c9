package gateway

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const examplePolicy = `
ask:
  task_type: tool_call
  deadline: 1h
  on_expiry: verdict:reject
rules:
  - tool: [read_*, list_*, search]
    allow: true
  - tool: delete_*
    deny: Deleting is not done from the agent.
  - tool: transfer
    when: args.amount < 100
    allow: true
  - tool: transfer
    when: args.currency == "EUR"
    ask:
      task_type: transfer
      approve: [approve]
      threshold: 0.9
      deadline: 30m
      notify: ["slack:#payments"]
      reviews: 2
      editable: [amount, memo]
  - tool: "*"
    when: client == "nightly-batch"
    deny: The nightly batch calls no tools that need approval.
`

func TestParsePolicy_TheExample(t *testing.T) {
	p, err := ParsePolicy("policy.yaml", []byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 5 || p.Default != Ask {
		t.Fatalf("policy = %+v", p)
	}
	if want := []string{"read_*", "list_*", "search"}; !reflect.DeepEqual(p.Rules[0].Tools, want) || p.Rules[0].Line != 7 {
		t.Errorf("rule 0 = %+v", p.Rules[0])
	}
	ask := p.Rules[3].Ask
	// The rule's settings over the file's: on_expiry is the file's.
	if ask.TaskType != "transfer" || ask.Deadline != 30*time.Minute || ask.OnExpiry != "verdict:reject" || *ask.Threshold != 0.9 ||
		ask.Reviews != 2 || !reflect.DeepEqual(ask.Editable, []string{"amount", "memo"}) || !reflect.DeepEqual(ask.Notify, []string{"slack:#payments"}) {
		t.Errorf("rule 3's ask = %+v", ask)
	}
	if p.Ask.TaskType != "tool_call" || p.Ask.Deadline != time.Hour {
		t.Errorf("the file's ask = %+v", p.Ask)
	}
}

func TestPolicy_Decide(t *testing.T) {
	p, err := ParsePolicy("policy.yaml", []byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call Call
		kind string
		line int
	}{
		{"a glob", Call{Tool: "read_file", Args: map[string]any{"path": "/etc"}}, Allow, 7},
		{"a name in a list", Call{Tool: "search"}, Allow, 7},
		{"deny", Call{Tool: "delete_everything"}, Deny, 9},
		{"a condition that holds", Call{Tool: "transfer", Args: map[string]any{"amount": 40.0, "currency": "EUR"}}, Allow, 11},
		{"an integer against a float", Call{Tool: "transfer", Args: map[string]any{"amount": 40, "currency": "EUR"}}, Allow, 11},
		{"a condition that does not hold", Call{Tool: "transfer", Args: map[string]any{"amount": 400.0, "currency": "EUR"}}, Ask, 14},
		// Fail closed: allow's condition cannot read amount, so it does
		// not allow; ask's cannot read currency, so it asks.
		{"an argument missing", Call{Tool: "transfer", Args: map[string]any{}}, Ask, 14},
		{"an argument of another type", Call{Tool: "transfer", Args: map[string]any{"amount": "forty", "currency": "EUR"}}, Ask, 14},
		{"a comparison of other types is false", Call{Tool: "transfer", Args: map[string]any{"amount": 400.0, "currency": 3}}, Ask, 0},
		{"the client", Call{Tool: "transfer", Args: map[string]any{"amount": 400.0, "currency": "USD"}, Client: "nightly-batch"}, Deny, 24},
		{"no rule: the default asks", Call{Tool: "transfer", Args: map[string]any{"amount": 400.0, "currency": "USD"}}, Ask, 0},
		{"no rule for the tool", Call{Tool: "write_file"}, Ask, 0},
	} {
		d := p.Decide(c.call)
		if d.Kind != c.kind || d.Line != c.line {
			t.Errorf("%s: %s at line %d, want %s at line %d", c.name, d.Kind, d.Line, c.kind, c.line)
		}
	}
	if d := p.Decide(Call{Tool: "delete_x"}); d.Reason != "Deleting is not done from the agent." {
		t.Errorf("deny's reason = %q", d.Reason)
	}
	if d := p.Decide(Call{Tool: "write_file"}); d.Ask.TaskType != "tool_call" || d.Ask.Deadline != time.Hour {
		t.Errorf("the default ask's settings = %+v, want the file's", d.Ask)
	}
	p.Default = Allow
	if d := p.Decide(Call{Tool: "write_file"}); d.Kind != Allow {
		t.Errorf("--default allow: %s", d.Kind)
	}
	p.Default = Deny
	if d := p.Decide(Call{Tool: "write_file"}); d.Kind != Deny || d.Reason == "" {
		t.Errorf("--default deny: %+v", d)
	}
}

// TestParsePolicy_Mistakes: each kind of mistake stops the gateway with
// the file, the line and what is wrong.
func TestParsePolicy_Mistakes(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"not YAML", "rules:\n  - tool: a\n\tallow: true\n", "policy.yaml:2: found a tab character that violates indentation"},
		{"empty", "", "policy.yaml: the file is empty"},
		{"no rules", "ask:\n  deadline: 1h\n", "policy.yaml:1: rules: the file has no rules"},
		{"rules not a list", "rules:\n  tool: a\n", "policy.yaml:2: rules: rules must be a list"},
		{"an unknown top key", "rulez: []\n", "policy.yaml:1: rulez: unknown key"},
		{"an unknown rule key", "rules:\n  - tool: a\n    alow: true\n", "policy.yaml:3: rules[0].alow: unknown key"},
		{"a key twice", "rules:\n  - tool: a\n    tool: b\n    allow: true\n", `policy.yaml:3: rules[0].tool: mapping key "tool" already defined at line 2`},
		{"no tool", "rules:\n  - allow: true\n", "policy.yaml:2: rules[0]: the rule names no tool"},
		{"a bad glob", "rules:\n  - tool: \"read_[\"\n    allow: true\n", `policy.yaml:2: rules[0].tool: "read_[" is not a glob`},
		{"a bad glob in a list", "rules:\n  - tool:\n      - a\n      - \"b[\"\n    allow: true\n", `policy.yaml:4: rules[0].tool: "b[" is not a glob`},
		{"no decision", "rules:\n  - tool: a\n", "policy.yaml:2: rules[0]: the rule says neither allow, deny nor ask"},
		{"two decisions", "rules:\n  - tool: a\n    allow: true\n    deny: no\n", "policy.yaml:2: rules[0]: the rule says allow and deny"},
		{"allow false", "rules:\n  - tool: a\n    allow: false\n", "policy.yaml:3: rules[0].allow: allow takes true"},
		{"deny without a reason", "rules:\n  - tool: a\n    deny: \"\"\n", "policy.yaml:3: rules[0].deny: deny takes the reason"},
		{"a condition that does not compile", "rules:\n  - tool: a\n    when: args.amount <\n    allow: true\n", "policy.yaml:3: rules[0].when: column"},
		{"a condition on an unknown variable", "rules:\n  - tool: a\n    when: amount < 3\n    allow: true\n", "undeclared reference to 'amount'"},
		{"a condition that is not a bool", "rules:\n  - tool: a\n    when: tool + \"x\"\n    allow: true\n", "policy.yaml:3: rules[0].when: the condition is of type string, not bool"},
		{"an unknown ask key", "rules:\n  - tool: a\n    ask:\n      deadlin: 1h\n", "policy.yaml:4: rules[0].ask.deadlin: unknown key; ask takes"},
		{"a bad deadline", "rules:\n  - tool: a\n    ask:\n      deadline: soon\n", `policy.yaml:4: rules[0].ask.deadline: deadline must be a duration`},
		{"a deadline the server refuses", "rules:\n  - tool: a\n    ask:\n      deadline: 10s\n", "policy.yaml:4: rules[0].ask.deadline: deadline_seconds"},
		{"a threshold out of range", "rules:\n  - tool: a\n    ask:\n      threshold: 2\n", "policy.yaml:4: rules[0].ask.threshold: confidence_threshold"},
		{"a threshold not a number", "rules:\n  - tool: a\n    ask:\n      threshold: high\n", `policy.yaml:4: rules[0].ask.threshold: expected a number, not "high"`},
		{"approve not a verdict", "rules:\n  - tool: a\n    ask:\n      verdicts: [yes, no]\n      approve: [approve]\n", `policy.yaml:5: rules[0].ask.approve: "approve" is not one of the verdicts (yes, no)`},
		{"on_expiry of no verdict", "rules:\n  - tool: a\n    ask:\n      on_expiry: verdict:maybe\n", "policy.yaml:4: rules[0].ask.on_expiry:"},
		{"a bad notify target", "rules:\n  - tool: a\n    ask:\n      notify: [\"pager:ops\"]\n", "policy.yaml:4: rules[0].ask.notify:"},
		{"reviews out of range", "rules:\n  - tool: a\n    ask:\n      reviews: 9\n", "policy.yaml:4: rules[0].ask.reviews:"},
		{"reviews not whole", "rules:\n  - tool: a\n    ask:\n      reviews: 1.5\n", "policy.yaml:4: rules[0].ask.reviews: expected a whole number"},
		{"editable twice", "rules:\n  - tool: a\n    ask:\n      editable: [amount, amount]\n", "policy.yaml:4: rules[0].ask.editable:"},
		{"a mistake in the file's ask", "ask:\n  verdicts: []\nrules:\n  - tool: a\n    ask: true\n", "policy.yaml:2: ask.verdicts:"},
	} {
		_, err := ParsePolicy("policy.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
