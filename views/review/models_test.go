package review

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestQueueCount_ShowsMoreThanTheCapAsAPlus(t *testing.T) {
	for n, want := range map[int]string{
		0:                          "0",
		42:                         "42",
		arbiter.QueueCountCap:      strconv.Itoa(arbiter.QueueCountCap),
		arbiter.QueueCountCap + 1:  strconv.Itoa(arbiter.QueueCountCap) + "+",
		arbiter.QueueCountCap + 99: strconv.Itoa(arbiter.QueueCountCap) + "+",
	} {
		if got := queueCount(n); got != want {
			t.Errorf("queueCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestTaskDesk_SaysWhatIsTrueOfThisTask renders a two-verdict task with
// the verifier's empty answer and a person's verdict: the keys offered are
// 1–2, not 1–9; the empty answer reads "no decision" without a "(–)"; the
// person's verdict carries no "(100%)"; and the heading names the task.
func TestTaskDesk_SaysWhatIsTrueOfThisTask(t *testing.T) {
	model, reviewer, verdict, full := "none", "ann@example.com", "reject", 1.0
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded,
		Prompt: "Refund order ord_7 for a broken mug that arrived in pieces, with photos attached?", AllowedVerdicts: []string{"approve", "reject"},
		Attempts: []arbiter.Attempt{
			{Tier: arbiter.TierAgent, Model: &model, Rationale: "No verifier is set up."},
			{Tier: arbiter.TierHuman, Reviewer: &reviewer, Verdict: &verdict, Confidence: &full},
		}}
	v := TaskView{Task: task, Action: "/review/tasks/" + task.ID, Position: 2, Total: 5}
	var b strings.Builder
	if err := TaskDesk(v).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"none:", "no decision", "ann@example.com:", `<kbd class="kbd">1</kbd>–<kbd class="kbd">2</kbd>`,
		"Task 2 of 5: Refund order ord_7 for a broken mug that arrived in pieces,…"} {
		if !strings.Contains(page, want) {
			t.Errorf("the desk lacks %q", want)
		}
	}
	for _, unwanted := range []string{"(–)", "(100%)", `<kbd class="kbd">9</kbd>`} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the desk says %q", unwanted)
		}
	}
}

func TestExpiresLine(t *testing.T) {
	now := time.Date(2026, 11, 26, 23, 55, 0, 0, time.UTC)
	at := func(d time.Duration) *arbiter.Timestamp { ts := arbiter.TimestampOf(now.Add(d)); return &ts }
	reject := arbiter.OnExpiry{Outcome: "verdict:reject"}
	for _, tc := range []struct {
		name string
		task arbiter.Task
		want string
	}{
		{"TodayTheClockTime", arbiter.Task{DeadlineAt: at(4 * time.Minute)}, "23:59 UTC, in 4 minutes"},
		{"AnotherDayTheDate", arbiter.Task{DeadlineAt: at(15 * time.Minute)}, "2026-11-27 00:10 UTC, in 15 minutes"},
		{"DaysAway", arbiter.Task{DeadlineAt: at(50 * time.Hour)}, "2026-11-29 01:55 UTC, in 2 days"},
		{"PastButNotSweptYet", arbiter.Task{DeadlineAt: at(-time.Minute)}, "23:54 UTC, now"},
		{"NoDeadline", arbiter.Task{}, ""},
		{"ADeadlineThatDecidesSaysItsOutcomeInstead", arbiter.Task{DeadlineAt: at(time.Hour), OnExpiry: reject}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExpiresLine(&tc.task, now); got != tc.want {
				t.Errorf("ExpiresLine = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQueueView_SubtitleFollowsTheList(t *testing.T) {
	plain := &arbiter.Task{Status: arbiter.StatusHumanNeeded}
	audit := &arbiter.Task{Status: arbiter.StatusCompleted, AuditState: arbiter.AuditStateWaiting}
	for _, tc := range []struct {
		name   string
		v      QueueView
		want   []string
		unsaid []string
	}{
		{"OldestFirst", QueueView{Tasks: []*arbiter.Task{plain}},
			[]string{"Tasks waiting for a person's verdict; escalated ones first, then the oldest."}, []string{"audits", "deadline", "not sure"}},
		{"WithAnAudit", QueueView{Tasks: []*arbiter.Task{plain, audit}},
			[]string{"blind audits of the verifier's confident answers among them"}, nil},
		{"ByDeadline", QueueView{Tasks: []*arbiter.Task{plain}, View: arbiter.QueueView{Order: arbiter.QueueByDeadline}},
			[]string{"the nearest deadline first, tasks without one last"}, []string{"oldest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.v.Subtitle()
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("Subtitle = %q, lacks %q", got, want)
				}
			}
			for _, unsaid := range tc.unsaid {
				if strings.Contains(got, unsaid) {
					t.Errorf("Subtitle = %q, says %q", got, unsaid)
				}
			}
		})
	}
}
