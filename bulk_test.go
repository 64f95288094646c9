package arbiter_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestParseBulkMarks(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	marks, err := arbiter.ParseBulkMarks([]string{"tsk_0123456789abcdef", "tsk_00000000000000ff@" + strings.Repeat("ab", 32)})
	if err != nil || len(marks) != 2 || marks[0].Digest != "" || marks[1].Digest != digest || marks[1].String() != "tsk_00000000000000ff@"+strings.Repeat("ab", 32) {
		t.Fatalf("ParseBulkMarks = %+v, %v", marks, err)
	}
	many := make([]string, arbiter.MaxBulkTasks+1)
	for i := range many {
		many[i] = "tsk_" + strings.Repeat("0", 13) + string(rune('a'+i%6)) + string(rune('a'+i/6%6)) + string(rune('a'+i/36))
	}
	for name, values := range map[string][]string{
		"none":         nil,
		"too many":     many,
		"twice":        {"tsk_0123456789abcdef", "tsk_0123456789abcdef"},
		"not an id":    {"everything"},
		"a bad digest": {"tsk_0123456789abcdef@zz"},
	} {
		if _, err := arbiter.ParseBulkMarks(values); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

func TestCheckBulk(t *testing.T) {
	p := mustAction(t, refundAction)
	other := mustAction(t, `{"name": "issue_refund", "args": {"amount": 1}}`)
	task := func(mod func(*arbiter.Task)) *arbiter.Task {
		tk := &arbiter.Task{ID: "tsk_0123456789abcdef", Prompt: "Refund?", Status: arbiter.StatusHumanNeeded, AllowedVerdicts: []string{"approve", "reject"}}
		if mod != nil {
			mod(tk)
		}
		return tk
	}
	withAction := func(a *arbiter.TaskAction) func(*arbiter.Task) { return func(tk *arbiter.Task) { tk.Action = a } }
	for _, c := range []struct {
		name  string
		tasks []*arbiter.Task
		marks []arbiter.BulkMark
		code  string
	}{
		{"plain tasks", []*arbiter.Task{task(nil), task(nil)}, []arbiter.BulkMark{{}, {}}, ""},
		{"one action shown on each", []*arbiter.Task{task(withAction(p)), task(withAction(p)), task(nil)},
			[]arbiter.BulkMark{{Digest: p.Digest}, {Digest: p.Digest}, {}}, ""},
		{"two actions", []*arbiter.Task{task(withAction(p)), task(withAction(other))},
			[]arbiter.BulkMark{{Digest: p.Digest}, {Digest: other.Digest}}, arbiter.EINVALID},
		{"an action marked under another digest", []*arbiter.Task{task(withAction(p))}, []arbiter.BulkMark{{Digest: other.Digest}}, arbiter.ECONFLICT},
		{"a verdict one task does not allow", []*arbiter.Task{task(func(tk *arbiter.Task) { tk.AllowedVerdicts = []string{"reject"} })},
			[]arbiter.BulkMark{{}}, arbiter.EINVALID},
		{"a consensus task", []*arbiter.Task{task(func(tk *arbiter.Task) { tk.Review = &arbiter.ReviewRequirement{ReviewsRequired: 2} })},
			[]arbiter.BulkMark{{}}, arbiter.EINVALID},
		{"a blind audit", []*arbiter.Task{task(func(tk *arbiter.Task) {
			tk.Status, tk.AuditState = arbiter.StatusCompleted, arbiter.AuditStateWaiting
		})}, []arbiter.BulkMark{{}}, arbiter.EINVALID},
		{"a task decided since", []*arbiter.Task{task(func(tk *arbiter.Task) { tk.Status = arbiter.StatusCompleted })},
			[]arbiter.BulkMark{{}}, arbiter.ECONFLICT},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := arbiter.CheckBulk(c.tasks, c.marks, "approve")
			if got := arbiter.ErrorCode(err); got != c.code {
				t.Errorf("CheckBulk = %v, want code %q", err, c.code)
			}
		})
	}
}
