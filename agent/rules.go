package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/celtask"
)

// Rules is the rules backend: CEL expressions, each with the verdict and
// confidence it gives when it matches, compiled once when loaded. The file
// format is in the package documentation. A Rules is safe for concurrent
// use.
type Rules struct {
	rules []rule
}

// rule is one compiled line of a rules file.
type rule struct {
	line       int
	verdict    string
	confidence float64
	expr       string
	program    cel.Program
}

// LoadRules reads and compiles the rules file at path.
func LoadRules(path string) (*Rules, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the rules file: %w", err)
	}
	return ParseRules(path, src)
}

// ParseRules compiles the rules in src. Errors start with name and the line
// at fault, as in "rules.txt:3: …".
func ParseRules(name string, src []byte) (*Rules, error) {
	var rs Rules
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "#") {
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
		return nil, fmt.Errorf("%s: the file holds no rules", name)
	}
	return &rs, nil
}

// parseRule reads one rule line: verdict, confidence, expression.
func parseRule(line string) (rule, error) {
	var r rule
	verdict, rest, err := cutVerdict(strings.TrimLeftFunc(line, unicode.IsSpace))
	if err != nil {
		return r, err
	}
	conf, expr := cutField(rest)
	if isConfidence(verdict) && !isConfidence(conf) {
		return r, fmt.Errorf("the rule has no verdict; write VERDICT CONFIDENCE EXPRESSION, e.g. approve 0.9 context.amount < 50")
	}
	if r.confidence, err = strconv.ParseFloat(conf, 64); err != nil || !isConfidence(conf) {
		return r, fmt.Errorf("the confidence %q must be a number between 0 and 1", conf)
	}
	r.verdict, r.expr = verdict, strings.TrimSpace(expr)
	if r.expr == "" {
		return r, errors.New("the rule has no expression")
	}
	column := utf8.RuneCountInString(line[:strings.LastIndex(line, r.expr)])
	if r.program, err = celtask.Compile(r.expr, column); err != nil {
		return r, err
	}
	return r, nil
}

// cutVerdict splits the leading verdict, a bare word or a JSON string, off
// line.
func cutVerdict(line string) (verdict, rest string, err error) {
	if !strings.HasPrefix(line, `"`) {
		verdict, rest = cutField(line)
		return verdict, rest, nil
	}
	dec := json.NewDecoder(strings.NewReader(line))
	if err := dec.Decode(&verdict); err != nil || strings.TrimSpace(verdict) == "" {
		return "", "", errors.New("the verdict must be a word or a non-empty JSON string")
	}
	return verdict, line[dec.InputOffset():], nil
}

// cutField splits s at its first run of white space, after leading white
// space.
func cutField(s string) (field, rest string) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// isConfidence reports whether s is a number in [0, 1].
func isConfidence(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f >= 0 && f <= 1
}

// InProcess reports that the rules answer in the process, with no outside
// call (worker.InProcessVerifier): the worker marks their calls started
// with its claim.
func (rs *Rules) InProcess() bool { return true }

// Verify returns the decision of the first matching rule whose verdict the
// task allows, or no decision. It fails only on a context that is not JSON
// or a cancelled ctx.
func (rs *Rules) Verify(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
	vars, err := ruleVars(t)
	if err != nil {
		return arbiter.Verification{}, err
	}
	for _, r := range rs.rules {
		if err := ctx.Err(); err != nil {
			return arbiter.Verification{}, err
		}
		if t.Allows(r.verdict) && r.matches(vars) {
			return arbiter.Verification{
				Decided:    true,
				Verdict:    r.verdict,
				Confidence: r.confidence,
				Rationale:  fmt.Sprintf("rule at line %d: %s", r.line, r.expr),
				Model:      BackendRules,
			}, nil
		}
	}
	return arbiter.Verification{Model: BackendRules, Rationale: "No rule matched."}, nil
}

// ruleVars binds task and context for t (celtask.Vars).
func ruleVars(t *arbiter.Task) (cel.Activation, error) { return celtask.Vars(CELTask(t)) }

// CELTask is what an expression sees of t.
func CELTask(t *arbiter.Task) celtask.Task {
	return celtask.Task{Prompt: t.Prompt, TaskType: t.TaskType, Touchpoint: t.Touchpoint, Source: t.Source,
		AllowedVerdicts: t.AllowedVerdicts, ConfidenceThreshold: t.ConfidenceThreshold, Context: t.Context}
}

// matches reports whether the rule's expression is true for vars; an
// evaluation error or a value that is not a bool is no match.
func (r rule) matches(vars cel.Activation) bool { return celtask.Matches(r.program, vars) }
