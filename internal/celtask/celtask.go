// Package celtask compiles and evaluates CEL expressions over a task, as
// the rules verifier and a policy's require_person_if read them: task (a
// map of prompt, task_type, touchpoint, source, allowed_verdicts and
// confidence_threshold) and context (the task's context JSON, null when
// absent), with CEL's standard functions.
package celtask

import (
	"encoding/json"
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// env declares what expressions see: task and context.
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("task", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("context", cel.DynType),
	)
	if err != nil {
		panic(fmt.Sprintf("celtask: the environment does not build: %v", err))
	}
	return e
}()

// Compile compiles a boolean expression. column, the expression's offset
// in its line (0 when it stands alone), makes error positions point into
// the line.
func Compile(expr string, column int) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		first := iss.Errors()[0]
		return nil, fmt.Errorf("column %d: %s", column+first.Location.Column()+1, first.Message)
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("the expression is of type %s, not bool", t)
	}
	program, err := env.Program(ast)
	if err != nil {
		return nil, fmt.Errorf("plan the expression: %w", err)
	}
	return program, nil
}

// Task is what an expression sees of a task.
type Task struct {
	Prompt, TaskType, Touchpoint, Source string
	AllowedVerdicts                      []string
	ConfidenceThreshold                  float64
	Context                              json.RawMessage
}

// Vars binds task and context for t. Both are built when an expression
// first reads them, once per evaluation: one that never reads the context
// does not decode it. A context that is not JSON is refused at once.
func Vars(t Task) (cel.Activation, error) {
	if len(t.Context) > 0 && !json.Valid(t.Context) {
		var v any
		return nil, fmt.Errorf("decode the task context: %w", json.Unmarshal(t.Context, &v))
	}
	return cel.NewActivation(map[string]any{
		"task": func() any {
			return map[string]any{
				"prompt":               t.Prompt,
				"task_type":            t.TaskType,
				"touchpoint":           t.Touchpoint,
				"source":               t.Source,
				"allowed_verdicts":     t.AllowedVerdicts,
				"confidence_threshold": t.ConfidenceThreshold,
			}
		},
		"context": func() any {
			var taskContext any
			if len(t.Context) > 0 {
				_ = json.Unmarshal(t.Context, &taskContext) // valid, checked above
			}
			return taskContext
		},
	})
}

// Matches reports whether program is true for vars; an evaluation error
// or a value that is not a bool is no match.
func Matches(program cel.Program, vars cel.Activation) bool {
	out, _, err := program.Eval(vars)
	if err != nil {
		return false
	}
	matched, ok := out.Value().(bool)
	return ok && matched
}
