package client_test

import (
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

func TestClient_ListTasks(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		var created []string
		for i := range 25 {
			source := "bot"
			if i%5 == 0 {
				source = "crm"
			}
			task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, Source: source})
			if err != nil {
				t.Fatal(err)
			}
			created = append(created, task.ID)
		}
		s.decide(t, created[3], "approve")

		page, err := c.ListTasks(ctx, client.ListOptions{Limit: 10})
		if err != nil || len(page.Tasks) != 10 || !page.HasMore {
			t.Fatalf("first page = %+v, %v", page, err)
		}
		if page.Tasks[0].CreatedAt.Before(page.Tasks[9].CreatedAt) {
			t.Error("the page is not newest first")
		}

		// Pages of 10, each after the last: 10, 10, 5.
		var sizes []int
		var walked []string
		for page, err := range c.TaskPages(ctx, client.ListOptions{Limit: 10}) {
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(page.Tasks))
			for _, task := range page.Tasks {
				walked = append(walked, task.ID)
			}
		}
		if !slices.Equal(sizes, []int{10, 10, 5}) || !slices.Equal(slices.Sorted(slices.Values(walked)), slices.Sorted(slices.Values(created))) {
			t.Errorf("pages of %v visited %d tasks, want 10, 10, 5 visiting each of the 25 once", sizes, len(walked))
		}

		// Filters, and stopping early.
		var crm []string
		for task, err := range c.AllTasks(ctx, client.ListOptions{Source: "crm", Limit: 2, CreatedAfter: time.Unix(1, 0)}) {
			if err != nil {
				t.Fatal(err)
			}
			if task.Source != "crm" {
				t.Errorf("source %q listed for crm", task.Source)
			}
			crm = append(crm, task.ID)
		}
		if len(crm) != 5 {
			t.Errorf("listed %d crm tasks, want 5", len(crm))
		}
		n := 0
		for range c.AllTasks(ctx, client.ListOptions{}) {
			if n++; n == 3 {
				break
			}
		}
		completed, err := c.ListTasks(ctx, client.ListOptions{Status: client.StatusCompleted, FinalTier: client.TierHuman})
		if err != nil || len(completed.Tasks) != 1 || completed.Tasks[0].ID != created[3] || completed.HasMore {
			t.Errorf("completed by a human = %+v, %v", completed, err)
		}

		if _, err := c.ListTasks(ctx, client.ListOptions{Status: "done"}); !client.IsInvalid(err) {
			t.Errorf("status done: %v, want a 400", err)
		}
		for _, err := range c.TaskPages(ctx, client.ListOptions{StartingAfter: "tsk_0123456789abcdef"}) {
			if !client.IsInvalid(err) {
				t.Errorf("an unknown starting_after: %v, want a 400", err)
			}
		}
	})
}
