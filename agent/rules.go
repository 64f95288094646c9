package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"

	"github.com/arbiterhq/arbiter"
)

// Rules is the rules backend: a list of CEL expressions, each with the
// verdict and confidence it gives when it matches.
//
// A rules file holds one rule per line; blank lines and lines starting with
// # are ignored. A rule is a verdict (a bare word, or a JSON string when it
// has spaces), a confidence between 0 and 1, and a CEL expression that must
// be true for the rule to match:
//
//	# verdict  confidence  expression
//	approve    0.95        task.task_type == "refund" && context.amount < 50
//	reject     0.9         context.customer.chargebacks > 2
//	"needs review" 0.99    task.prompt.contains("legal")
//
// Expressions see task (prompt, task_type, touchpoint, source,
// allowed_verdicts, confidence_threshold) and context (the task's context
// JSON, null when absent). The first matching rule whose verdict the task
// allows decides; an expression that fails to evaluate (a missing field,
// say) does not match. When no rule matches, the task goes to a human.
type Rules struct {
	rules []rule
}

type rule struct {
	line       int
	verdict    string
	confidence float64
	expr       string
	program    cel.Program
}

var rulesEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("task", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("context", cel.DynType),
	)
	if err != nil {
		panic(err)
	}
	return env
}()

// LoadRules reads and compiles a rules file.
func LoadRules(path string) (*Rules, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return ParseRules(path, src)
}

// ParseRules compiles rules; name prefixes errors, which give the line.
func ParseRules(name string, src []byte) (*Rules, error) {
	var rs Rules
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r, err := parseRule(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		r.line = n
		rs.rules = append(rs.rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(rs.rules) == 0 {
		return nil, fmt.Errorf("%s: no rules", name)
	}
	return &rs, nil
}

func parseRule(line string) (rule, error) {
	var r rule
	verdict, rest, err := cutVerdict(line)
	if err != nil {
		return r, err
	}
	conf, expr, _ := strings.Cut(strings.TrimSpace(rest), " ")
	r.verdict, r.expr = verdict, strings.TrimSpace(expr)
	if r.confidence, err = strconv.ParseFloat(conf, 64); err != nil || r.confidence < 0 || r.confidence > 1 {
		return r, fmt.Errorf("the confidence %q must be a number between 0 and 1", conf)
	}
	if r.expr == "" {
		return r, fmt.Errorf("the rule has no expression")
	}
	ast, iss := rulesEnv.Compile(r.expr)
	if iss.Err() != nil {
		return r, fmt.Errorf("%s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return r, fmt.Errorf("the expression is a %s, not a bool", t)
	}
	if r.program, err = rulesEnv.Program(ast); err != nil {
		return r, err
	}
	return r, nil
}

// cutVerdict splits the leading verdict, bare or a JSON string, off line.
func cutVerdict(line string) (verdict, rest string, err error) {
	if !strings.HasPrefix(line, `"`) {
		verdict, rest, _ = strings.Cut(line, " ")
		return verdict, rest, nil
	}
	dec := json.NewDecoder(strings.NewReader(line))
	if err := dec.Decode(&verdict); err != nil || verdict == "" {
		return "", "", fmt.Errorf("the verdict must be a word or a non-empty JSON string")
	}
	return verdict, line[dec.InputOffset():], nil
}

// Verify returns the decision of the first matching rule whose verdict the
// task allows, or no decision.
func (rs *Rules) Verify(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
	var taskContext any
	if len(t.Context) > 0 {
		if err := json.Unmarshal(t.Context, &taskContext); err != nil {
			return arbiter.Verification{}, fmt.Errorf("task context: %w", err)
		}
	}
	vars := map[string]any{
		"task": map[string]any{
			"prompt": t.Prompt, "task_type": t.TaskType, "touchpoint": t.Touchpoint, "source": t.Source,
			"allowed_verdicts": t.AllowedVerdicts, "confidence_threshold": t.ConfidenceThreshold,
		},
		"context": taskContext,
	}
	for _, r := range rs.rules {
		if ctx.Err() != nil {
			return arbiter.Verification{}, ctx.Err()
		}
		if !t.Allows(r.verdict) {
			continue
		}
		out, _, err := r.program.Eval(vars)
		if err != nil {
			continue
		}
		if matched, ok := out.Value().(bool); ok && matched {
			return arbiter.Verification{
				Decided: true, Verdict: r.verdict, Confidence: r.confidence,
				Rationale: fmt.Sprintf("rule at line %d: %s", r.line, r.expr), Model: BackendRules,
			}, nil
		}
	}
	return arbiter.Verification{Model: BackendRules, Rationale: "No rule matched."}, nil
}
