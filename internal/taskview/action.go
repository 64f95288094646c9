package taskview

import "encoding/json"

// ActionCall returns a task's action (its tool's name and its args, a
// JSON object) as the tool call the desk shows, its values the tree's;
// args that do not fit the tree are shown as text.
func ActionCall(name string, args json.RawMessage) *ToolCall {
	c := &ToolCall{Name: name, ArgsText: string(args)}
	if tree, _, ok := parseTree(string(args), MaxNodes); ok && tree.Kind == Object {
		c.Args = tree
	}
	return c
}
