package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// # The policy file
//
// A YAML file (the verifiers file's family: JSON is YAML too) of rules in
// order; the first rule that matches a tool call decides it:
//
//	ask:                          # settings of every ask (optional)
//	  task_type: tool_call
//	  deadline: 1h
//	  on_expiry: verdict:reject
//	rules:
//	  - tool: [read_*, list_*, search]
//	    allow: true
//	  - tool: delete_*
//	    deny: Deleting is not done from the agent.
//	  - tool: transfer
//	    when: args.amount < 100   # CEL over args, tool and client
//	    allow: true
//	  - tool: transfer
//	    ask:
//	      task_type: transfer
//	      verdicts: [approve, reject]
//	      approve: [approve]      # the verdicts that run the call
//	      threshold: 0.9          # or leave it to the task type's policy
//	      deadline: 30m
//	      on_expiry: verdict:reject
//	      notify: ["slack:#payments"]
//	      reviews: 2
//	      editable: [amount, memo]
//
// A call no rule matches gets the gateway's default (Policy.Default): ask,
// with the file's ask settings, unless the operator chose otherwise.
// LoadPolicy reads the file; every error names the file and the line.

// Decision kinds: what the gateway does with a call.
const (
	Allow = "allow" // pass the call to the upstream server
	Deny  = "deny"  // refuse it with the rule's reason
	Ask   = "ask"   // hold it until an Arbiter task approves it
)

// DefaultTaskType is the task type of an ask whose settings name none.
const DefaultTaskType = "tool_call"

// Policy is a parsed policy file: its rules, in order, and what a call no
// rule matches gets.
type Policy struct {
	Rules []Rule
	// Default is the decision kind of a call no rule matches: Ask unless
	// the operator opted out.
	Default string
	// Ask are the file's ask settings: every ask rule's, where it says
	// nothing else, and the default ask's.
	Ask AskSettings
}

// Rule is one rule of a policy file.
type Rule struct {
	// Line is the rule's line in the file, which logs and tasks name.
	Line int
	// Tools are the names or globs (path.Match: *, ?, [a-z]) of the
	// tools the rule applies to.
	Tools []string
	// When, when not "", is the CEL condition over the call's args, tool
	// and client under which the rule applies.
	When    string
	program cel.Program
	// Kind is Allow, Deny or Ask.
	Kind string
	// Reason is a Deny rule's reason, which the agent reads.
	Reason string
	// Ask are an Ask rule's task settings: its own over the file's.
	Ask AskSettings
}

// AskSettings are what the task an ask creates asks for. Zero values
// leave the field to the task type's policy on the server (threshold,
// deadline, on-expiry, notify, reviews) or to the defaults below.
type AskSettings struct {
	// TaskType is the task's type, which selects the account's policy
	// (DefaultTaskType when empty).
	TaskType string
	// Verdicts are the task's allowed verdicts (approve, reject when
	// empty); Approve the ones that run the call (the first verdict's
	// when empty).
	Verdicts []string
	Approve  []string
	// Threshold is the confidence below which a person decides.
	Threshold *float64
	// Deadline is how long the task waits for a decision.
	Deadline time.Duration
	// OnExpiry is what the deadline decides ("expire", "verdict:<v>",
	// "agent_verdict"), with AgentFloor and OnExpiryFallback for
	// agent_verdict.
	OnExpiry         string
	AgentFloor       *float64
	OnExpiryFallback string
	// Notify are the task's notification targets ("slack:#payments").
	Notify []string
	// Reviews is how many people vote; Consensus and Quorum how their
	// votes decide.
	Reviews   int
	Consensus string
	Quorum    int
	// Editable are the arguments a reviewer may change before approving.
	Editable []string
}

// VerdictsOrDefault returns the allowed verdicts: s.Verdicts, or approve
// and reject.
func (s AskSettings) VerdictsOrDefault() []string {
	if len(s.Verdicts) > 0 {
		return s.Verdicts
	}
	return []string{"approve", "reject"}
}

// ApproveOrDefault returns the verdicts that run the call: s.Approve, or
// the first allowed verdict.
func (s AskSettings) ApproveOrDefault() []string {
	if len(s.Approve) > 0 {
		return s.Approve
	}
	return s.VerdictsOrDefault()[:1]
}

// TaskTypeOrDefault returns the task type: s.TaskType, or DefaultTaskType.
func (s AskSettings) TaskTypeOrDefault() string {
	if s.TaskType != "" {
		return s.TaskType
	}
	return DefaultTaskType
}

// Call is what the policy reads of a tool call.
type Call struct {
	Tool string
	// Args are the call's arguments, decoded from JSON (nil for none).
	Args map[string]any
	// Client is the agent's MCP client's name, as its initialize gave it.
	Client string
}

// Decision is what the policy says of a call.
type Decision struct {
	// Kind is Allow, Deny or Ask.
	Kind string
	// Reason is a Deny's reason.
	Reason string
	// Ask are an Ask's task settings.
	Ask AskSettings
	// Line is the line of the rule that decided, 0 for the default.
	Line int
}

// Decide returns what the first rule that matches c says, or the
// default. A condition that cannot be evaluated for c (an argument it
// reads is missing, or of another type) fails closed: it counts as
// matching for a rule that denies or asks, and as not matching for one
// that allows.
func (p *Policy) Decide(c Call) Decision {
	var vars cel.Activation
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.appliesTo(c.Tool) {
			continue
		}
		if r.program != nil {
			if vars == nil {
				args := c.Args
				if args == nil {
					args = map[string]any{}
				}
				vars, _ = cel.NewActivation(map[string]any{"args": args, "tool": c.Tool, "client": c.Client})
			}
			matched, ok := r.eval(vars)
			if !ok {
				matched = r.Kind != Allow
			}
			if !matched {
				continue
			}
		}
		return Decision{Kind: r.Kind, Reason: r.Reason, Ask: r.Ask, Line: r.Line}
	}
	kind := p.Default
	if kind == "" {
		kind = Ask
	}
	d := Decision{Kind: kind, Ask: p.Ask}
	if kind == Deny {
		d.Reason = "No rule of the gateway's policy allows this tool, and the gateway refuses what no rule allows."
	}
	return d
}

// appliesTo reports whether the rule names tool.
func (r *Rule) appliesTo(tool string) bool {
	for _, pattern := range r.Tools {
		if ok, _ := path.Match(pattern, tool); ok {
			return true
		}
	}
	return false
}

// eval evaluates the rule's condition: its value, and whether it had one
// (a bool).
func (r *Rule) eval(vars cel.Activation) (matched, ok bool) {
	out, _, err := r.program.Eval(vars)
	if err != nil {
		return false, false
	}
	b, ok := out.Value().(bool)
	return b, ok
}

// policyEnv declares what conditions see: the call's args, the tool's
// name and the client's.
var policyEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("client", cel.StringType),
	)
	if err != nil {
		panic(fmt.Sprintf("gateway: the policy environment does not build: %v", err))
	}
	return env
}()

// LoadPolicy reads the policy file at path. Errors start with the path
// and the line at fault: "policy.yaml:7: rules[1].when: …".
func LoadPolicy(path string) (*Policy, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the policy file: %w", err)
	}
	return ParsePolicy(path, src)
}

// ParsePolicy reads a policy file's text; name is how errors call the
// file.
func ParsePolicy(name string, src []byte) (*Policy, error) {
	p := yamlfile.New(name)
	top, err := p.Parse(src, "it lists rules, such as rules: [{tool: read_*, allow: true}]")
	if err != nil {
		return nil, err
	}
	var askNode, rulesNode *yaml.Node
	err = p.Mapping(top, "", func(key string, k, v *yaml.Node) error {
		switch key {
		case "ask":
			askNode = v
		case "rules":
			rulesNode = v
		default:
			return p.Fail(k, key, "unknown key; the file holds rules and ask (the settings of every ask)")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	pol := &Policy{Default: Ask}
	if askNode != nil {
		if pol.Ask, err = readAsk(p, askNode, "ask", AskSettings{}); err != nil {
			return nil, err
		}
	}
	if rulesNode == nil {
		return nil, p.Fail(top, "rules", "the file has no rules; list them in order, such as rules: [{tool: read_*, allow: true}]")
	}
	if rulesNode.Kind != yaml.SequenceNode || len(rulesNode.Content) == 0 {
		return nil, p.Fail(rulesNode, "rules", "rules must be a list of at least one rule, each a mapping such as {tool: read_*, allow: true}")
	}
	for i, item := range rulesNode.Content {
		at := fmt.Sprintf("rules[%d]", i)
		p.Remember(at, item.Line)
		r, err := readRule(p, item, at, pol.Ask)
		if err != nil {
			return nil, err
		}
		pol.Rules = append(pol.Rules, r)
	}
	return pol, nil
}

// readRule reads one rule; base are the file's ask settings.
func readRule(p *yamlfile.Parser, n *yaml.Node, at string, base AskSettings) (Rule, error) {
	r := Rule{Line: n.Line}
	var kinds []string
	err := p.Mapping(n, at, func(key string, k, v *yaml.Node) error {
		path := at + "." + key
		switch key {
		case "tool":
			tools, err := toolPatterns(p, v, path)
			r.Tools = tools
			return err
		case "when":
			expr, err := p.Scalar(v, path)
			if err != nil {
				return err
			}
			if r.program, err = compileCondition(expr); err != nil {
				return p.Fail(v, path, "%s", err)
			}
			r.When = expr
		case "allow":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Value != "true" {
				return p.Fail(v, path, "allow takes true (allow: true); to refuse the call, write deny: and the reason")
			}
			kinds = append(kinds, Allow)
			r.Kind = Allow
		case "deny":
			reason, err := p.Scalar(v, path)
			if err != nil || strings.TrimSpace(reason) == "" {
				return p.Fail(v, path, "deny takes the reason the agent is told, such as deny: Deleting is not done from the agent.")
			}
			kinds = append(kinds, Deny)
			r.Kind, r.Reason = Deny, strings.TrimSpace(reason)
		case "ask":
			kinds = append(kinds, Ask)
			r.Kind = Ask
			if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" && v.Value == "true" {
				r.Ask = base
				return nil
			}
			s, err := readAsk(p, v, path, base)
			r.Ask = s
			return err
		default:
			return p.Fail(k, path, "unknown key; a rule takes tool, when, and one of allow, deny or ask")
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	switch {
	case r.Tools == nil:
		return r, p.Fail(n, at, "the rule names no tool; write tool: and a name, a glob such as read_*, or a list of them (* for every tool)")
	case len(kinds) == 0:
		return r, p.Fail(n, at, "the rule says neither allow, deny nor ask; give it one of them")
	case len(kinds) > 1:
		return r, p.Fail(n, at, "the rule says %s; give it one of allow, deny or ask", strings.Join(kinds, " and "))
	}
	return r, nil
}

// toolPatterns reads tool: a name or glob, or a list of them.
func toolPatterns(p *yamlfile.Parser, n *yaml.Node, at string) ([]string, error) {
	var tools []string
	if n.Kind == yaml.SequenceNode {
		list, err := p.Strings(n, at, "[read_file, list_*]")
		if err != nil {
			return nil, err
		}
		tools = list
	} else {
		s, err := p.Scalar(n, at)
		if err != nil {
			return nil, err
		}
		tools = []string{s}
	}
	if len(tools) == 0 {
		return nil, p.Fail(n, at, "tool must name at least one tool")
	}
	for i, t := range tools {
		if strings.TrimSpace(t) == "" {
			return nil, p.FailAt(p.LineOf(fmt.Sprintf("%s[%d]", at, i)), at, "a tool's name or glob must not be empty")
		}
		if _, err := path.Match(t, ""); err != nil {
			return nil, p.FailAt(p.LineOf(fmt.Sprintf("%s[%d]", at, i)), at, "%q is not a glob: * matches any run of characters, ? one, [a-z] one of a set", t)
		}
	}
	return tools, nil
}

// compileCondition compiles a rule's condition, which must be a bool.
func compileCondition(expr string) (cel.Program, error) {
	ast, iss := policyEnv.Compile(expr)
	if iss.Err() != nil {
		first := iss.Errors()[0]
		return nil, fmt.Errorf("column %d: %s (the condition sees args, tool and client)", first.Location.Column()+1, first.Message)
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("the condition is of type %s, not bool", t)
	}
	program, err := policyEnv.Program(ast)
	if err != nil {
		return nil, fmt.Errorf("the condition cannot be planned: %w", err)
	}
	return program, nil
}

// askKeys are the keys of ask settings.
const askKeys = "task_type, verdicts, approve, threshold, deadline, on_expiry, agent_floor, on_expiry_fallback, notify, reviews, consensus, quorum and editable"

// readAsk reads ask settings at path over base, then checks them as the
// server checks a create.
func readAsk(p *yamlfile.Parser, n *yaml.Node, at string, base AskSettings) (AskSettings, error) {
	s := base
	err := p.Mapping(n, at, func(key string, k, v *yaml.Node) error {
		path := at + "." + key
		var err error
		switch key {
		case "task_type":
			s.TaskType, err = p.Scalar(v, path)
		case "verdicts":
			if s.Verdicts, err = p.Strings(v, path, "[approve, reject]"); err == nil && len(s.Verdicts) == 0 {
				err = p.Fail(v, path, "verdicts must name at least two verdicts, or be left out (approve, reject)")
			}
		case "approve":
			if s.Approve, err = p.Strings(v, path, "[approve]"); err == nil && len(s.Approve) == 0 {
				err = p.Fail(v, path, "approve must name at least one verdict, or be left out (the first verdict)")
			}
		case "threshold":
			var f float64
			if f, err = p.Number(v, path); err == nil {
				s.Threshold = &f
			}
		case "deadline":
			var text string
			if text, err = p.Scalar(v, path); err == nil {
				d, perr := time.ParseDuration(text)
				if perr != nil || d <= 0 || d%time.Second != 0 {
					return p.Fail(v, path, "deadline must be a duration in whole seconds, such as 90s, 30m or 24h, not %q", text)
				}
				s.Deadline = d
			}
		case "on_expiry":
			s.OnExpiry, err = p.Scalar(v, path)
		case "agent_floor":
			var f float64
			if f, err = p.Number(v, path); err == nil {
				s.AgentFloor = &f
			}
		case "on_expiry_fallback":
			s.OnExpiryFallback, err = p.Scalar(v, path)
		case "notify":
			s.Notify, err = p.Strings(v, path, `["slack:#payments"]`)
		case "reviews":
			s.Reviews, err = wholeNumber(p, v, path)
		case "consensus":
			s.Consensus, err = p.Scalar(v, path)
		case "quorum":
			s.Quorum, err = wholeNumber(p, v, path)
		case "editable":
			s.Editable, err = p.Strings(v, path, "[amount, memo]")
		default:
			err = p.Fail(k, path, "unknown key; ask takes %s", askKeys)
		}
		return err
	})
	if err != nil {
		return s, err
	}
	return s, checkAsk(p, s, at)
}

// wholeNumber reads a whole number.
func wholeNumber(p *yamlfile.Parser, n *yaml.Node, at string) (int, error) {
	f, err := p.Number(n, at)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f < 0 || f > 1e6 {
		return 0, p.Fail(n, at, "expected a whole number, not %s", n.Value)
	}
	return int(f), nil
}

// createFields name the keys of ask settings by the create's fields they
// become, for the server's errors.
var createFields = map[string]string{
	"task_type":            "task_type",
	"allowed_verdicts":     "verdicts",
	"confidence_threshold": "threshold",
	"deadline_seconds":     "deadline",
	"on_expiry":            "on_expiry",
	"agent_floor":          "agent_floor",
	"on_expiry_fallback":   "on_expiry_fallback",
	"notify":               "notify",
	"reviews_required":     "reviews",
	"consensus":            "consensus",
	"quorum":               "quorum",
	"action.editable":      "editable",
	"edit_verdicts":        "approve",
}

// checkAsk checks s as the server checks the creates it makes (with any
// tool's name and editable arguments), so that settings the server would
// refuse stop the gateway at start, at their line.
func checkAsk(p *yamlfile.Parser, s AskSettings, at string) error {
	verdicts := s.VerdictsOrDefault()
	for i, v := range s.Approve {
		if !slices.Contains(verdicts, v) {
			return p.FailAt(p.LineOf(fmt.Sprintf("%s.approve[%d]", at, i)), at+".approve",
				"%q is not one of the verdicts (%s); approve names the verdicts that run the call", v, strings.Join(verdicts, ", "))
		}
	}
	members := map[string]any{}
	for _, name := range s.Editable {
		members[name] = nil
	}
	args, _ := json.Marshal(members)
	in := createOf(s, "the tool", args, nil)
	in.Prompt = "A check of the policy file."
	body, err := json.Marshal(in)
	if err != nil {
		return p.FailAt(p.LineOf(at), at, "%v", err)
	}
	if _, err := arbiter.ParseTaskCreate(body); err != nil {
		var e *arbiter.Error
		key := ""
		if errors.As(err, &e) {
			key = createFields[e.Field]
		}
		if key == "" {
			return p.FailAt(p.LineOf(at), at, "%s", arbiter.ErrorMessage(err))
		}
		return p.FailAt(p.LineOf(at+"."+key), at+"."+key, "%s", arbiter.ErrorMessage(err))
	}
	return nil
}

// createOf is the create an ask with settings s makes for a call of tool
// with args (a JSON object) and the tool's input schema (nil for none):
// the task's settings and the action; the caller adds the prompt, the
// context and the idempotency key. Editable names only members args has.
func createOf(s AskSettings, tool string, args json.RawMessage, schema json.RawMessage) client.TaskCreate {
	in := client.TaskCreate{
		AllowedVerdicts:     s.VerdictsOrDefault(),
		TaskType:            s.TaskTypeOrDefault(),
		Touchpoint:          Touchpoint,
		ConfidenceThreshold: s.Threshold,
		DeadlineSeconds:     int(s.Deadline / time.Second),
		OnExpiry:            s.OnExpiry,
		AgentFloor:          s.AgentFloor,
		OnExpiryFallback:    s.OnExpiryFallback,
		Notify:              s.Notify,
		ReviewsRequired:     s.Reviews,
		Consensus:           s.Consensus,
		Quorum:              s.Quorum,
	}
	action := &client.ActionCreate{Name: tool, Args: args}
	if len(schema) > 0 {
		action.Schema = schema
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(args, &members)
	for _, name := range s.Editable {
		if _, ok := members[name]; ok {
			action.Editable = append(action.Editable, name)
		}
	}
	if len(action.Editable) > 0 {
		in.EditVerdicts = s.ApproveOrDefault()
	}
	in.Action = action
	return in
}

// Touchpoint is the touchpoint of the tasks the gateway creates.
const Touchpoint = "mcp_gateway"
