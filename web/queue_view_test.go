package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// labelledTask stores a task with the labels and deadline for the account
// and hands it to a human.
func labelledTask(t *testing.T, d *dash, email, prompt, taskType, source, touchpoint string, deadline int) {
	t.Helper()
	acct, err := d.store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(time.Second)
	if _, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, TaskType: taskType, Source: source, Touchpoint: touchpoint, DeadlineSeconds: deadline}); err != nil {
		t.Fatal(err)
	}
	claimed, err := d.store.ClaimTasks(ctx, "wrk_test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := d.store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// order returns the prompts of the page's queue, in order.
func order(body string, prompts ...string) []string {
	type at struct {
		i int
		p string
	}
	var found []at
	for _, p := range prompts {
		if i := strings.Index(body, p); i >= 0 {
			found = append(found, at{i, p})
		}
	}
	for i := range found {
		for j := i + 1; j < len(found); j++ {
			if found[j].i < found[i].i {
				found[i], found[j] = found[j], found[i]
			}
		}
	}
	out := []string{}
	for _, f := range found {
		out = append(out, f.p)
	}
	return out
}

func TestReviewQueue_Views(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("team@example.com")
		labelledTask(t, d, "team@example.com", "Refund A", "refund", "shop", "email", 0)
		labelledTask(t, d, "team@example.com", "Refund B", "refund", "app", "chat", 3600)
		labelledTask(t, d, "team@example.com", "Moderate C", "moderation", "shop", "chat", 600)
		all := []string{"Refund A", "Refund B", "Moderate C"}

		for _, c := range []struct {
			query string
			want  []string
		}{
			{"", []string{"Refund A", "Refund B", "Moderate C"}},
			{"?task_type=refund", []string{"Refund A", "Refund B"}},
			{"?source=shop", []string{"Refund A", "Moderate C"}},
			{"?touchpoint=chat&source=shop", []string{"Moderate C"}},
			{"?order=deadline", []string{"Moderate C", "Refund B", "Refund A"}},
			{"?task_type=refund&order=deadline", []string{"Refund B", "Refund A"}},
			{"?task_type=nothing", []string{}},
		} {
			r := b.get("/review" + c.query)
			wantStatus(t, r, http.StatusOK)
			if got := order(r.body, all...); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("/review%s lists %v, want %v", c.query, got, c.want)
			}
			// The list's polling keeps the view; so does the poll's answer.
			if c.query != "" && !strings.Contains(r.body, `hx-get="/review/queue`+strings.ReplaceAll(c.query, "&", "&amp;")) &&
				!strings.Contains(r.body, `hx-get="/review/queue?`) {
				t.Errorf("/review%s: the list polls without its view", c.query)
			}
			poll := b.get("/review/queue" + c.query)
			if got := order(poll.body, all...); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("/review/queue%s lists %v, want %v", c.query, got, c.want)
			}
		}
		// A bad view is a readable 400 page.
		for _, q := range []string{"?order=sideways", "?source=" + url.QueryEscape(strings.Repeat("x", 201)), "?task_type=a%00b"} {
			r := b.get("/review" + q)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="error-message"`) {
				t.Errorf("/review%s = %d\n%.1000s", q, r.status, r.body)
			}
		}
	})
}
