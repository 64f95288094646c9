package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/client"
)

// TestTools_NeverAnswerAGoldVerdict: even when the task read carries a
// gold verdict (the client's GetTask and ListTasks do), get_task and
// list_tasks answer no gold_verdict: a model reading them may be the one
// being measured.
func TestTools_NeverAnswerAGoldVerdict(t *testing.T) {
	gold := "verdict-kestrel"
	task := pending("tsk_1")
	task.AllowedVerdicts = []string{gold, "verdict-plover"}
	task.GoldVerdict = &gold
	cs := connect(t, &fakeTasks{
		get: func(context.Context, string) (*client.Task, error) { return task, nil },
		list: func(context.Context, client.ListOptions) (*client.TaskPage, error) {
			return &client.TaskPage{Tasks: []*client.Task{task}}, nil
		},
	})
	for name, args := range map[string]map[string]any{"get_task": {"task_id": "tsk_1"}, "list_tasks": {}} {
		out, text, isError := call(t, cs, name, args)
		b, _ := json.Marshal(out)
		if isError || strings.Contains(strings.ToLower(string(b)+text), "gold") ||
			strings.Count(string(b), gold) != strings.Count(string(b), "verdict-plover") {
			t.Errorf("%s answered %s / %s", name, b, text)
		}
	}
}
