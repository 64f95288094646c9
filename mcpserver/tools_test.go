package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
)

// fakeTasks is a Tasks of function fields; the transport tests in
// cmd/arbiter drive the tools against a real server.
type fakeTasks struct {
	create func(context.Context, client.TaskCreate) (*client.Task, error)
	get    func(context.Context, string) (*client.Task, error)
	wait   func(context.Context, string, *client.WaitOptions) (*client.Task, error)
	list   func(context.Context, client.ListOptions) (*client.TaskPage, error)
}

func (f *fakeTasks) CreateTask(ctx context.Context, in client.TaskCreate) (*client.Task, error) {
	return f.create(ctx, in)
}
func (f *fakeTasks) GetTask(ctx context.Context, id string) (*client.Task, error) {
	return f.get(ctx, id)
}
func (f *fakeTasks) WaitTask(ctx context.Context, id string, o *client.WaitOptions) (*client.Task, error) {
	return f.wait(ctx, id, o)
}
func (f *fakeTasks) ListTasks(ctx context.Context, o client.ListOptions) (*client.TaskPage, error) {
	return f.list(ctx, o)
}

// connect serves New(tasks) to a client of the SDK in memory.
func connect(t *testing.T, tasks Tasks) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := New(tasks).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol failure: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	var out map[string]any
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(b, &out)
	}
	return out, strings.Join(text, "\n"), res.IsError
}

func pending(id string) *client.Task {
	return &client.Task{ID: id, Status: client.StatusHumanNeeded, CreatedAt: time.Unix(1795415525, 0)}
}

var askArgs = map[string]any{"prompt": "Refund?", "allowed_verdicts": []string{"approve", "reject"}, "wait_seconds": 1}

func TestAskVerdict_AWaitThatFailsAnswersTheTaskItKnows(t *testing.T) {
	// The server went away during the wait, and is still away: the task
	// exists, and the model is told to read it later.
	tasks := &fakeTasks{
		create: func(context.Context, client.TaskCreate) (*client.Task, error) { return pending("tsk_1"), nil },
		wait: func(context.Context, string, *client.WaitOptions) (*client.Task, error) {
			return nil, errors.New("connection refused")
		},
		get: func(context.Context, string) (*client.Task, error) {
			return nil, &client.Error{StatusCode: http.StatusServiceUnavailable, Message: "The database did not answer."}
		},
	}
	out, text, isError := call(t, connect(t, tasks), "ask_verdict", askArgs)
	if isError || out["task_id"] != "tsk_1" || out["status"] != "human_needed" || !strings.Contains(out["message"].(string), `get_task with task_id "tsk_1"`) {
		t.Errorf("ask_verdict = %v %s", out, text)
	}
}

func TestAskVerdict_ReadsTheTaskAgainWhenTheWaitIsOver(t *testing.T) {
	var waited time.Duration
	tasks := &fakeTasks{
		create: func(_ context.Context, in client.TaskCreate) (*client.Task, error) {
			if in.Touchpoint != Touchpoint {
				t.Errorf("touchpoint = %q", in.Touchpoint)
			}
			t := pending("tsk_2")
			t.Status = client.StatusPending
			return t, nil
		},
		wait: func(ctx context.Context, id string, o *client.WaitOptions) (*client.Task, error) {
			deadline, _ := ctx.Deadline()
			waited = time.Until(deadline)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		get: func(context.Context, string) (*client.Task, error) { return pending("tsk_2"), nil },
	}
	out, text, isError := call(t, connect(t, tasks), "ask_verdict", askArgs)
	if isError || out["status"] != "human_needed" || !strings.Contains(out["message"].(string), "Not decided within 1 second") {
		t.Errorf("ask_verdict = %v %s", out, text)
	}
	if waited <= 0 || waited > time.Second {
		t.Errorf("the wait had %s", waited)
	}
}

func TestTools_ErrorsCarryTheSentenceAndWhenToRetry(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"Cap", &client.Error{StatusCode: 429, Message: "The account's daily task cap is used up; it resets at 00:00 UTC.", RetryAfter: 3*time.Hour + 11*time.Minute + 5*time.Second},
			"The account's daily task cap is used up; it resets at 00:00 UTC. Try again in 3 hours 12 minutes."},
		{"KeyInFlight", &client.Error{StatusCode: 409, Message: "Still being processed.", RetryAfter: time.Second}, "Still being processed. Try again in 1 second."},
		{"Invalid", &client.Error{StatusCode: 400, Message: "prompt is required."}, "prompt is required."},
		{"Unreachable", errors.New("dial tcp: connection refused"), "Arbiter could not be reached: dial tcp: connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tasks := &fakeTasks{create: func(context.Context, client.TaskCreate) (*client.Task, error) { return nil, c.err }}
			_, text, isError := call(t, connect(t, tasks), "ask_verdict", askArgs)
			if !isError || text != c.want {
				t.Errorf("tool error = %v %q, want %q", isError, text, c.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	agent, human, verdict := client.TierAgent, client.TierHuman, "approve"
	for _, c := range []struct {
		task   client.Task
		waited time.Duration
		want   string
	}{
		{client.Task{ID: "tsk_1", Status: client.StatusCompleted, FinalVerdict: &verdict, FinalTier: &agent}, 0,
			`Decided: the verdict is "approve", given by the automated verifier.`},
		{client.Task{ID: "tsk_1", Status: client.StatusCompleted, FinalVerdict: &verdict, FinalTier: &human}, 0,
			`Decided: the verdict is "approve", given by a human reviewer.`},
		{client.Task{ID: "tsk_1", Status: client.StatusExpired}, 0, "The task expired"},
		{client.Task{ID: "tsk_1", Status: client.StatusPending}, 50 * time.Second,
			`Not decided within 50 seconds: the task is pending (waiting for the automated verifier). Do not ask again: call get_task with task_id "tsk_1"`},
		{client.Task{ID: "tsk_1", Status: client.StatusHumanNeeded}, 0, "Not decided yet: the task is human_needed (waiting for a human reviewer"},
	} {
		if got := message(&c.task, c.waited); !strings.HasPrefix(got, c.want) {
			t.Errorf("message(%s) = %q, want it to start %q", c.task.Status, got, c.want)
		}
	}
}

func TestApproximately(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "1 second", 400 * time.Millisecond: "1 second", 59 * time.Second: "59 seconds", time.Minute: "1 minute",
		61 * time.Second: "2 minutes", time.Hour: "1 hour", 2*time.Hour + time.Minute: "2 hours 1 minute",
	} {
		if got := approximately(d); got != want {
			t.Errorf("approximately(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestCut(t *testing.T) {
	if got := cut("héllo wörld", 5); got != "héll…" {
		t.Errorf("cut = %q", got)
	}
	if got := cut("short", 5); got != "short" {
		t.Errorf("cut = %q", got)
	}
}

// TestAskVerdict_ReportsProgressWhileItWaits: a call made with a progress
// token hears how long it has waited, of how long it may, while no verdict
// has come; when the verdict comes the call answers it.
func TestAskVerdict_ReportsProgressWhileItWaits(t *testing.T) {
	decide := make(chan struct{})
	verdict, human := "approve", "human"
	tasks := &fakeTasks{
		create: func(context.Context, client.TaskCreate) (*client.Task, error) { return pending("tsk_3"), nil },
		wait: func(ctx context.Context, id string, _ *client.WaitOptions) (*client.Task, error) {
			select {
			case <-decide:
				return &client.Task{ID: id, Status: client.StatusCompleted, FinalVerdict: &verdict, FinalTier: &human}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := newServer(&tools{tasks: tasks, progressEvery: 10 * time.Millisecond}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })

	params := &mcp.CallToolParams{Name: "ask_verdict", Arguments: map[string]any{
		"prompt": "Refund?", "allowed_verdicts": []string{"approve", "reject"}, "wait_seconds": 60}}
	params.SetProgressToken("ask-1")
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		answered <- result{res, err}
	}()
	for range 2 { // two, so the second shows the wait going on
		select {
		case p := <-progress:
			if p.ProgressToken != "ask-1" || p.Total != 60 || !strings.HasPrefix(p.Message, "Waiting for the verdict: ") ||
				!strings.HasSuffix(p.Message, " of 60 seconds.") {
				t.Errorf("progress = %+v", p)
			}
		case r := <-answered:
			t.Fatalf("the call answered before any progress: %+v, %v", r.res, r.err)
		}
	}
	close(decide)
	r := <-answered
	if r.err != nil || r.res.IsError {
		t.Fatalf("ask_verdict = %+v, %v", r.res, r.err)
	}
	var out map[string]any
	if b, err := json.Marshal(r.res.StructuredContent); err == nil {
		json.Unmarshal(b, &out)
	}
	if out["verdict"] != "approve" || out["tier"] != "human" {
		t.Errorf("the answer = %v", out)
	}
}

func TestTools_DescribeTheAPIsLimits(t *testing.T) {
	props := askVerdictTool().InputSchema.(*jsonschema.Schema).Properties
	for _, c := range []struct {
		property string
		want     []string
	}{
		{"allowed_verdicts", []string{fmt.Sprintf("1 to %d distinct", arbiter.MaxVerdicts), fmt.Sprintf("at most %d characters", arbiter.MaxVerdictChars)}},
		{"task_type", []string{fmt.Sprintf("At most %d characters", arbiter.MaxLabelChars)}},
		{"source", []string{fmt.Sprintf("At most %d characters", arbiter.MaxLabelChars)}},
		{"prompt", []string{fmt.Sprintf("At most %d KiB", arbiter.MaxPromptBytes>>10)}},
		{"context", []string{fmt.Sprintf("At most %d KiB", arbiter.MaxContextBytes>>10)}},
		{"deadline_seconds", []string{fmt.Sprintf("%d to %d", arbiter.MinDeadlineSeconds, arbiter.MaxDeadlineSeconds)}},
	} {
		for _, want := range c.want {
			if d := props[c.property].Description; !strings.Contains(d, want) {
				t.Errorf("%s's description %q does not say %q", c.property, d, want)
			}
		}
	}
}
