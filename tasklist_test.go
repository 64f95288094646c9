package arbiter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestTaskCursor_RoundTrip(t *testing.T) {
	for _, c := range []arbiter.TaskCursor{
		{CreatedAt: 1763805600123, ID: "tsk_0123456789abcdef"},
		{CreatedAt: 0, ID: "tsk_demo_refund_late_delivery"},
	} {
		s := c.String()
		if strings.ContainsAny(s, "+/=&?#% ") {
			t.Errorf("cursor %q is not URL-safe", s)
		}
		got, err := arbiter.ParseTaskCursor(s)
		if err != nil || got != c {
			t.Errorf("ParseTaskCursor(%q) = %+v, %v; want %+v", s, got, err, c)
		}
	}
}

func TestParseTaskCursor_ErrInvalid(t *testing.T) {
	valid := arbiter.TaskCursor{CreatedAt: 5, ID: "tsk_0123456789abcdef"}.String()
	for _, s := range []string{
		"", "!!!", valid + "x", valid[:len(valid)-2], "tsk_0123456789abcdef",
		arbiter.TaskCursor{CreatedAt: -1, ID: "tsk_0123456789abcdef"}.String(),
		arbiter.TaskCursor{CreatedAt: 5, ID: "'; DROP TABLE tasks"}.String(),
		strings.Repeat("A", 10000),
	} {
		if _, err := arbiter.ParseTaskCursor(s); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("ParseTaskCursor(%.40q) = %v, want EINVALID", s, err)
		}
	}
}

func TestTaskFilter_Validate(t *testing.T) {
	f := arbiter.TaskFilter{}
	if err := f.Validate(); err != nil || f.Limit != arbiter.DefaultTaskPageSize {
		t.Errorf("the empty filter: %v, limit %d", err, f.Limit)
	}
	for _, ok := range []arbiter.TaskFilter{
		{Status: arbiter.StatusHumanNeeded, Limit: 1}, {FinalTier: arbiter.TierHuman, Limit: arbiter.MaxTaskPageSize},
		{Source: strings.Repeat("é", arbiter.MaxLabelChars)},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v refused: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		f    arbiter.TaskFilter
		word string // the message names the field
	}{
		{arbiter.TaskFilter{Status: "done"}, "status"},
		{arbiter.TaskFilter{FinalTier: "robot"}, "final_tier"},
		{arbiter.TaskFilter{Limit: -1}, "limit"},
		{arbiter.TaskFilter{Limit: arbiter.MaxTaskPageSize + 1}, "limit"},
		{arbiter.TaskFilter{Source: strings.Repeat("s", arbiter.MaxLabelChars+1)}, "source"},
		{arbiter.TaskFilter{TaskType: "\xff"}, "task_type"},
		{arbiter.TaskFilter{Source: "a\x00b"}, "source"},
		{arbiter.TaskFilter{Touchpoint: "\x00"}, "touchpoint"},
		{arbiter.TaskFilter{Touchpoint: strings.Repeat("t", arbiter.MaxLabelChars+1)}, "touchpoint"},
		{arbiter.TaskFilter{After: &arbiter.TaskCursor{ID: "nope"}}, "cursor"},
	} {
		err := tc.f.Validate()
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), tc.word) {
			t.Errorf("%+v: %v, want EINVALID naming %s", tc.f, err, tc.word)
		}
	}
}

func TestTaskPage_Next(t *testing.T) {
	last := &arbiter.Task{ID: "tsk_0123456789abcdef", CreatedAt: 42}
	if next := (arbiter.TaskPage{Tasks: []*arbiter.Task{{ID: "tsk_ffffffffffffffff"}, last}, HasMore: true}).Next(); next == nil || *next != arbiter.CursorOf(last) {
		t.Errorf("Next = %+v, want the last task's cursor", next)
	}
	if next := (arbiter.TaskPage{Tasks: []*arbiter.Task{last}}).Next(); next != nil {
		t.Errorf("the last page's Next = %+v, want nil", next)
	}
}

func TestParseTaskListQuery(t *testing.T) {
	ts := func(ms int64) *arbiter.Timestamp { v := arbiter.Timestamp(ms); return &v }
	for _, tc := range []struct {
		query string
		want  arbiter.TaskFilter
	}{
		{"", arbiter.TaskFilter{Limit: arbiter.DefaultTaskPageSize}},
		{"status=human_needed&limit=100", arbiter.TaskFilter{Status: arbiter.StatusHumanNeeded, Limit: 100}},
		{"task_type=refund&source=support-bot&touchpoint=e%20mail&final_tier=agent&limit=1",
			arbiter.TaskFilter{TaskType: "refund", Source: "support-bot", Touchpoint: "e mail", FinalTier: arbiter.TierAgent, Limit: 1}},
		{"created_after=1795415525&created_before=1795415525.173",
			arbiter.TaskFilter{CreatedAfter: ts(1795415525000), CreatedBefore: ts(1795415525173), Limit: arbiter.DefaultTaskPageSize}},
		{"starting_after=tsk_0123456789abcdef", arbiter.TaskFilter{StartingAfter: "tsk_0123456789abcdef", Limit: arbiter.DefaultTaskPageSize}},
	} {
		got, err := arbiter.ParseTaskListQuery(tc.query)
		times := sameTime(got.CreatedAfter, tc.want.CreatedAfter) && sameTime(got.CreatedBefore, tc.want.CreatedBefore)
		got.CreatedAfter, got.CreatedBefore, tc.want.CreatedAfter, tc.want.CreatedBefore = nil, nil, nil, nil
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) || !times {
			t.Errorf("ParseTaskListQuery(%q) = %+v, %v; want %+v", tc.query, got, err, tc.want)
		}
	}
}

func sameTime(a, b *arbiter.Timestamp) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func TestParseTaskListQuery_ErrInvalid(t *testing.T) {
	for _, tc := range []struct {
		query, word string // the message names the parameter
	}{
		{"status=done", "status"},
		{"status=COMPLETED", "status"},
		{"status=", "status"},
		{"status=pending&status=completed", "status"},
		{"final_tier=robot", "final_tier"},
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=-1", "limit"},
		{"limit=%2B5", "limit"},
		{"limit=5.0", "limit"},
		{"limit=ten", "limit"},
		{"limit=99999999999999999999", "limit"},
		{"created_after=yesterday", "created_after"},
		{"created_after=-1", "created_after"},
		{"created_before=NaN", "created_before"},
		{"created_before=Inf", "created_before"},
		{"created_before=1e300", "created_before"},
		{"starting_after=nope", "starting_after"},
		{"starting_after=%27%20OR%201=1", "starting_after"},
		{"source=" + strings.Repeat("s", arbiter.MaxLabelChars+1), "source"},
		{"task_type=%ff", "task_type"},
		{"source=a%00b", "source"},
		{"sort=created_at", "sort"},
		{"Status=pending", "Status"},
		{"%zz", "query"},
	} {
		_, err := arbiter.ParseTaskListQuery(tc.query)
		if arbiter.ErrorCode(err) != arbiter.EINVALID || !strings.Contains(arbiter.ErrorMessage(err), tc.word) {
			t.Errorf("ParseTaskListQuery(%.60q) = %v, want EINVALID naming %s", tc.query, err, tc.word)
		}
	}
}
