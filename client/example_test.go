package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/arbiterhq/arbiter/client"
)

func ExampleNew() {
	// With no options the client reads SVC_API_KEY and SVC_BASE_URL.
	c := client.New()
	_ = c

	// Options override the environment.
	c = client.New(
		client.WithAPIKey("svc_live_0123456789abcdef0123456789ab"),
		client.WithBaseURL("https://arbiter.example.com"),
		client.WithUserAgent("refund-bot/1.2"),
		client.WithRetries(5),
	)
	_ = c
}

func ExampleClient_CreateTask() {
	c := client.New()
	task, err := c.CreateTask(context.Background(), client.TaskCreate{
		Prompt:              "Approve this refund?",
		AllowedVerdicts:     []string{"approve", "reject", "escalate"},
		ConfidenceThreshold: client.Threshold(0.9),
		TaskType:            "refund",
		Touchpoint:          "email",
		Source:              "support-bot",
		Context:             map[string]any{"order": "ord_1", "amount": 42.5},
	})
	var apiErr *client.Error
	switch {
	case client.IsRateLimited(err) && errors.As(err, &apiErr):
		log.Fatalf("daily cap reached; it resets in %s", apiErr.RetryAfter)
	case client.IsInvalid(err):
		log.Fatalf("the task was refused: %v", err)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(task.ID, task.Status)
}

func ExampleClient_CreateTask_idempotencyKey() {
	c := client.New()
	// A key per task the program means to create, here the order's id:
	// if the create times out or the connection drops, sending it again
	// (the client does so itself) returns the task made the first time
	// instead of a second one.
	task, err := c.CreateTask(context.Background(), client.TaskCreate{
		Prompt:          "Approve this refund?",
		AllowedVerdicts: []string{"approve", "reject"},
		Context:         map[string]any{"order": "ord_1", "amount": 42.5},
		IdempotencyKey:  "refund/ord_1",
	})
	if client.IsUnprocessable(err) {
		log.Fatal("refund/ord_1 was used for a different question")
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.ID, task.Status)
}

func ExampleClient_CreateTasks() {
	c := client.New()
	var tasks []client.TaskCreate
	for _, order := range []string{"ord_1", "ord_2", "ord_3"} {
		tasks = append(tasks, client.TaskCreate{
			Prompt:          "Approve the refund of " + order + "?",
			AllowedVerdicts: []string{"approve", "reject"},
			IdempotencyKey:  "refund/" + order,
		})
	}
	results, err := c.CreateTasks(context.Background(), tasks)
	if err != nil {
		log.Fatal(err) // nothing was stored
	}
	for i, r := range results {
		switch {
		case client.IsRateLimited(r.Err):
			fmt.Println(i, "over the daily cap; send it again tomorrow")
		case r.Err != nil:
			fmt.Println(i, "refused:", r.Err)
		default:
			fmt.Println(i, r.Task.ID, r.Replayed)
		}
	}
}

func ExampleClient_GetTask() {
	c := client.New()
	task, err := c.GetTask(context.Background(), "tsk_3f9a0c1b2d4e5f60")
	if client.IsNotFound(err) {
		log.Fatal("no such task in this account")
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status, len(task.Attempts))
}

func ExampleClient_WaitTask() {
	c := client.New()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	task, err := c.WaitTask(ctx, "tsk_3f9a0c1b2d4e5f60", &client.WaitOptions{LongPoll: 30 * time.Second})
	if err != nil {
		log.Fatal(err) // the task is still with the verifier or a person
	}
	if task.Status == client.StatusExpired {
		log.Fatalf("nobody decided before the deadline, %s", task.DeadlineAt.Format(time.RFC3339))
	}
	fmt.Printf("%s by the %s tier at %s\n", *task.FinalVerdict, *task.FinalTier, task.CompletedAt.Format(time.RFC3339))
}

func ExampleClient_DemoTasks() {
	c := client.New()
	tasks, err := c.DemoTasks(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tasks {
		fmt.Println(t.ID, t.AllowedVerdicts)
	}
}

func ExampleClient_SubmitDemoVerdict() {
	c := client.New()
	v, err := c.SubmitDemoVerdict(context.Background(), client.DemoVerdictCreate{
		TaskID:        "tsk_demo_refund_late_delivery",
		Verdict:       "approve",
		Rationale:     "Nine days late is past the promise.",
		AnonSessionID: "anon_123",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.ID)
}

func ExampleClient_Health() {
	c := client.New()
	h, err := c.Health(context.Background())
	if err != nil {
		log.Fatal(err) // the server did not answer
	}
	if !h.OK {
		log.Fatalf("unhealthy: %s", h.Error)
	}
	fmt.Println("ok")
}

func ExampleClient_AllTasks() {
	c := client.New()
	ctx := context.Background()
	// Every task a reviewer decided today, newest first, 100 a page.
	today := time.Now().Truncate(24 * time.Hour)
	for task, err := range c.AllTasks(ctx, client.ListOptions{FinalTier: client.TierHuman, CreatedAfter: today, Limit: 100}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(task.ID, *task.FinalVerdict)
	}
}
