package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
)

// The waits of the tools, in whole seconds.
const (
	// DefaultAskWait is how long ask_verdict waits for the verdict when
	// the call names no wait_seconds: under the minute many MCP clients
	// allow a tool call.
	DefaultAskWait = 50
	// MaxWait is the longest wait_seconds, the API's longest long-poll.
	MaxWait = int(client.MaxLongPoll / time.Second)
)

// Touchpoint is the touchpoint of the tasks ask_verdict creates, so that
// the dashboard and list_tasks tell them from the API's.
const Touchpoint = "mcp"

// listPromptRunes bounds each prompt list_tasks answers, so that a page
// of long prompts does not flood the model's context; get_task answers
// the whole prompt.
const listPromptRunes = 500

// The schemas below state the types, the required fields, the enums and
// the range of the tools' own wait_seconds and limit. The task's own rules
// (lengths, the threshold's and the deadline's ranges, distinct verdicts)
// are in the descriptions and judged by the server, so that a model gets
// the API's sentence for them, the one every client gets.

// The sentences a wrong JSON type of an argument gets: the API's for the
// task's fields, and the same kind for the tools' own.
var (
	askVerdictTypeErrors = func() map[string]string {
		m := arbiter.TaskFieldTypeErrors()
		m["wait_seconds"] = errWaitSeconds
		m["idempotency_key"] = "idempotency_key must be a string of 1 to 255 printable ASCII characters."
		return m
	}()
	getTaskTypeErrors = map[string]string{
		"task_id":      "task_id must be a string: the id ask_verdict or list_tasks answered, such as tsk_0123456789abcdef.",
		"wait_seconds": errWaitSeconds,
	}
	listTasksTypeErrors = map[string]string{
		"status": "status must be a string.", "final_tier": "final_tier must be a string.",
		"task_type": "task_type must be a string.", "source": "source must be a string.", "touchpoint": "touchpoint must be a string.",
		"created_after":  "created_after must be a time in RFC 3339, such as 2026-11-23T00:00:00Z.",
		"created_before": "created_before must be a time in RFC 3339, such as 2026-11-23T00:00:00Z.",
		"limit":          errLimit, "starting_after": "starting_after must be a string: the next_starting_after of the page before.",
	}
)

// errWaitSeconds and errLimit are the sentences of a wait_seconds and a
// limit out of range or of the wrong type.
var (
	errWaitSeconds = fmt.Sprintf("wait_seconds must be a whole number of seconds from 0 to %d.", MaxWait)
	errLimit       = fmt.Sprintf("limit must be a whole number from 1 to %d.", arbiter.MaxTaskPageSize)
)

type askVerdictInput struct {
	Prompt              string   `json:"prompt" jsonschema:"The closed question to decide, with what a reviewer needs to decide it (who asks, what for, the amounts, the policy that applies). At most 32 KiB."`
	AllowedVerdicts     []string `json:"allowed_verdicts" jsonschema:"The answers the question may get, such as [\"approve\", \"reject\"]: 1 to 64 distinct non-empty strings of at most 200 characters. The verdict is always one of them."`
	Context             any      `json:"context,omitempty" jsonschema:"Optional facts the verifier and the reviewer see beside the prompt: any JSON value, usually an object such as {\"order\": \"ord_1\", \"amount\": 42.5}. At most 256 KiB."`
	ConfidenceThreshold *float64 `json:"confidence_threshold,omitempty" jsonschema:"Optional, 0 to 1 (default 0.8): the automated verifier decides alone only when its confidence reaches this; otherwise a human reviewer decides. Higher sends more to people."`
	TaskType            string   `json:"task_type,omitempty" jsonschema:"Optional label for the kind of question, such as refund or content_moderation (default decide). At most 200 characters."`
	Source              string   `json:"source,omitempty" jsonschema:"Optional free-form label of who or what asks, for filtering later (list_tasks source). At most 200 characters."`
	DeadlineSeconds     int      `json:"deadline_seconds,omitempty" jsonschema:"Optional: the task expires, without a verdict, if nobody decides it within this many seconds of its creation: 60 to 2592000 (30 days). Default: no deadline."`
	WaitSeconds         *int     `json:"wait_seconds,omitempty" jsonschema:"How long this call waits for the verdict before answering with the task's status instead: 0 to 60 seconds (default 50). The verdict may come later; get_task reads it."`
	IdempotencyKey      string   `json:"idempotency_key,omitempty" jsonschema:"Optional but recommended: a key unique to the decision you ask about (an order id, a UUID you keep), 1 to 255 printable ASCII characters. Calling again with the same key and the same question returns the task made first instead of asking twice."`
}

type getTaskInput struct {
	TaskID      string `json:"task_id" jsonschema:"The task's id, as ask_verdict or list_tasks answered it: tsk_ and 16 hex digits."`
	WaitSeconds *int   `json:"wait_seconds,omitempty" jsonschema:"Optional: wait up to this many seconds, 0 to 60 (default 0), for the task to be decided, answering as soon as it is."`
}

type listTasksInput struct {
	Status        string `json:"status,omitempty" jsonschema:"Only tasks in this status."`
	FinalTier     string `json:"final_tier,omitempty" jsonschema:"Only completed tasks decided by this tier: human (a reviewer), agent (the automated verifier) or fallback (the task's on-expiry outcome at its deadline)."`
	TaskType      string `json:"task_type,omitempty" jsonschema:"Only tasks with exactly this task_type."`
	Source        string `json:"source,omitempty" jsonschema:"Only tasks with exactly this source."`
	Touchpoint    string `json:"touchpoint,omitempty" jsonschema:"Only tasks with exactly this touchpoint; ask_verdict's tasks have mcp."`
	CreatedAfter  string `json:"created_after,omitempty" jsonschema:"Only tasks created after this time, in RFC 3339 such as 2026-11-23T00:00:00Z."`
	CreatedBefore string `json:"created_before,omitempty" jsonschema:"Only tasks created before this time, in RFC 3339."`
	Limit         *int   `json:"limit,omitempty" jsonschema:"How many tasks to answer, 1 to 100 (default 20)."`
	StartingAfter string `json:"starting_after,omitempty" jsonschema:"To read the next page: the next_starting_after of the page before."`
}

// taskAnswer is a task as the tools answer it: what a model needs, times
// in RFC 3339, and a sentence saying what to do next.
type taskAnswer struct {
	TaskID          string   `json:"task_id" jsonschema:"The task's id, for get_task."`
	Status          string   `json:"status" jsonschema:"pending, agent_running or human_needed while undecided; completed once decided; expired when its deadline passed first, without a verdict."`
	Verdict         *string  `json:"verdict,omitempty" jsonschema:"The verdict, one of allowed_verdicts, once the task is completed."`
	Tier            *string  `json:"tier,omitempty" jsonschema:"Who decided: agent (the automated verifier) or human (a reviewer)."`
	Confidence      *float64 `json:"confidence,omitempty" jsonschema:"The decider's confidence in the verdict, 0 to 1, when it gave one."`
	Rationale       string   `json:"rationale,omitempty" jsonschema:"Why, in the decider's words, when it gave a reason."`
	Prompt          string   `json:"prompt,omitempty" jsonschema:"The question (get_task and list_tasks; list_tasks cuts it at 500 characters)."`
	AllowedVerdicts []string `json:"allowed_verdicts,omitempty" jsonschema:"The answers the question may get (get_task)."`
	TaskType        string   `json:"task_type,omitempty" jsonschema:"The task's task_type label."`
	Source          string   `json:"source,omitempty" jsonschema:"The task's source label."`
	CreatedAt       string   `json:"created_at" jsonschema:"When the task was created, in RFC 3339."`
	CompletedAt     string   `json:"completed_at,omitempty" jsonschema:"When it was decided, in RFC 3339."`
	DeadlineAt      string   `json:"deadline_at,omitempty" jsonschema:"When it expires unless decided by then, in RFC 3339."`
	Message         string   `json:"message,omitempty" jsonschema:"What the answer means and what to do next."`
}

type taskList struct {
	Tasks             []taskAnswer `json:"tasks" jsonschema:"The tasks, newest first."`
	HasMore           bool         `json:"has_more" jsonschema:"Whether more tasks match than this page holds."`
	NextStartingAfter string       `json:"next_starting_after,omitempty" jsonschema:"When has_more: pass it as starting_after to read the next page."`
}

func askVerdictTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "ask_verdict",
		Title: "Ask for a verdict",
		Description: "Ask for a verdict on a closed question and wait for it. Use it before an action that needs " +
			"approval or a judgment you should not make alone (a refund, a deletion, a message to a customer): give " +
			"the question as prompt, the possible answers as allowed_verdicts, and the facts as context. An automated " +
			"verifier answers first; when its confidence is below confidence_threshold, a human reviewer decides, which " +
			"can take minutes or hours. The call waits up to wait_seconds (default 50) and answers the verdict, the tier " +
			"that decided (agent or human), its confidence and the task_id. If the task is not decided in time it answers " +
			"the task_id and status instead: call get_task with that task_id later rather than asking again. Pass an " +
			"idempotency_key so that a retried call never creates a second task.",
		InputSchema: inputSchema[askVerdictInput](func(p map[string]*jsonschema.Schema) {
			waitRange(p["wait_seconds"], DefaultAskWait)
			only(p["allowed_verdicts"], "array")
			only(p["confidence_threshold"], "number")
		}),
		Annotations: &mcp.ToolAnnotations{
			Title: "Ask for a verdict", DestructiveHint: jsonschema.Ptr(false), OpenWorldHint: jsonschema.Ptr(false),
		},
	}
}

func getTaskTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "get_task",
		Title: "Read a task",
		Description: "Read a task that ask_verdict created: its status and, once it is decided, the verdict, the tier " +
			"that decided (agent or human), the confidence and the rationale. With wait_seconds (up to 60) it waits for " +
			"the verdict, answering as soon as the task is decided, or when the wait is over with the task as it is then. " +
			"Use it to collect a verdict that ask_verdict did not wait long enough for.",
		InputSchema: inputSchema[getTaskInput](func(p map[string]*jsonschema.Schema) {
			waitRange(p["wait_seconds"], 0)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Read a task", ReadOnlyHint: true, OpenWorldHint: jsonschema.Ptr(false)},
	}
}

func listTasksTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "list_tasks",
		Title: "List tasks",
		Description: "List the account's tasks, newest first, optionally filtered by status, by the tier that decided " +
			"them, by label and by creation time, for questions such as \"what did the reviewers decide today\" " +
			"(final_tier human, created_after today's midnight). Answers up to limit tasks (default 20, at most 100) " +
			"with their verdicts; when has_more is true, pass next_starting_after as starting_after for the next page. " +
			"Prompts are cut at 500 characters; get_task answers a whole task.",
		InputSchema: inputSchema[listTasksInput](func(p map[string]*jsonschema.Schema) {
			p["status"].Enum = []any{client.StatusPending, client.StatusAgentRunning, client.StatusHumanNeeded,
				client.StatusCompleted, client.StatusExpired}
			p["final_tier"].Enum = []any{client.TierHuman, client.TierAgent, client.TierFallback}
			p["created_after"].Format = "date-time"
			p["created_before"].Format = "date-time"
			only(p["limit"], "integer")
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(arbiter.MaxTaskPageSize))
		}),
		Annotations: &mcp.ToolAnnotations{Title: "List tasks", ReadOnlyHint: true, OpenWorldHint: jsonschema.Ptr(false)},
	}
}

// inputSchema infers the schema of T and lets edit refine its properties.
func inputSchema[T any](edit func(properties map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: the schema of %T: %v", *new(T), err))
	}
	edit(s.Properties)
	return s
}

// only makes s of type typ alone: a Go slice or pointer is inferred as
// also null, which no call needs to send.
func only(s *jsonschema.Schema, typ string) {
	s.Type, s.Types = typ, nil
}

// waitRange states wait_seconds' type, range and default.
func waitRange(s *jsonschema.Schema, def int) {
	only(s, "integer")
	s.Minimum, s.Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(float64(MaxWait))
	s.Default = json.RawMessage(fmt.Sprint(def))
}

// tools are the tools' handlers over one Tasks.
type tools struct {
	tasks Tasks
	// progressEvery is how often a wait reports its progress (ProgressEvery).
	progressEvery time.Duration
}

// ProgressEvery is how often a call that waits for a verdict tells a client
// that asked for progress (a progressToken in the call's _meta) how long it
// has waited, so that the client sees the call alive and may keep its own
// timeout going.
const ProgressEvery = 5 * time.Second

// askVerdict creates the task and waits for its verdict.
func (t *tools) askVerdict(ctx context.Context, req *mcp.CallToolRequest, in askVerdictInput) (*mcp.CallToolResult, taskAnswer, error) {
	wait, err := waitSeconds(in.WaitSeconds, DefaultAskWait)
	if err != nil {
		return nil, taskAnswer{}, err
	}
	var args json.RawMessage
	if req != nil && req.Params != nil {
		args = req.Params.Arguments
	}
	created, err := t.create(ctx, args, in)
	if err != nil {
		return nil, taskAnswer{}, toolError(err)
	}
	task, err := t.read(ctx, req, created.ID, created, wait)
	if err != nil {
		return nil, taskAnswer{}, toolError(err)
	}
	return nil, answer(task, wait), nil
}

// create creates the task an ask_verdict call asks for; args are the
// call's arguments as sent, in decoded.
func (t *tools) create(ctx context.Context, args json.RawMessage, in askVerdictInput) (*client.Task, error) {
	return t.tasks.CreateTask(ctx, client.TaskCreate{
		Prompt:              in.Prompt,
		AllowedVerdicts:     in.AllowedVerdicts,
		ConfidenceThreshold: in.ConfidenceThreshold,
		TaskType:            in.TaskType,
		Touchpoint:          Touchpoint,
		Source:              in.Source,
		Context:             contextAsSent(args, in.Context),
		DeadlineSeconds:     in.DeadlineSeconds,
		IdempotencyKey:      in.IdempotencyKey,
	})
}

// contextAsSent returns the context of an ask_verdict call as the call's
// own bytes: the SDK checks a tool's arguments by decoding them into Go
// values, numbers as float64, which rounds integers past 2^53 (a 19-digit
// order id) and sorts an object's keys. decoded, the context as the SDK
// decoded it, stands when the bytes cannot be had.
func contextAsSent(arguments json.RawMessage, decoded any) any {
	var args struct {
		Context json.RawMessage `json:"context"`
	}
	if err := json.Unmarshal(arguments, &args); err != nil || len(args.Context) == 0 || string(args.Context) == "null" {
		return decoded
	}
	return args.Context
}

// getTask reads a task, waiting for its verdict when asked to.
func (t *tools) getTask(ctx context.Context, req *mcp.CallToolRequest, in getTaskInput) (*mcp.CallToolResult, taskAnswer, error) {
	wait, err := waitSeconds(in.WaitSeconds, 0)
	if err != nil {
		return nil, taskAnswer{}, err
	}
	if strings.TrimSpace(in.TaskID) == "" {
		return nil, taskAnswer{}, errors.New("task_id is required: the id ask_verdict or list_tasks answered, such as tsk_0123456789abcdef.")
	}
	task, err := t.read(ctx, req, in.TaskID, nil, wait)
	if err != nil {
		return nil, taskAnswer{}, toolError(err)
	}
	a := answer(task, wait)
	a.Prompt, a.AllowedVerdicts = task.Prompt, task.AllowedVerdicts
	return nil, a, nil
}

// listTasks reads one page of the account's tasks.
func (t *tools) listTasks(ctx context.Context, _ *mcp.CallToolRequest, in listTasksInput) (*mcp.CallToolResult, taskList, error) {
	opts := client.ListOptions{
		Status: in.Status, FinalTier: in.FinalTier, TaskType: in.TaskType, Source: in.Source, Touchpoint: in.Touchpoint,
		StartingAfter: in.StartingAfter,
	}
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > arbiter.MaxTaskPageSize {
			return nil, taskList{}, errors.New(errLimit)
		}
		opts.Limit = *in.Limit
	}
	for _, f := range []struct {
		name, value string
		out         *time.Time
	}{{"created_after", in.CreatedAfter, &opts.CreatedAfter}, {"created_before", in.CreatedBefore, &opts.CreatedBefore}} {
		if f.value == "" {
			continue
		}
		parsed, err := time.Parse(time.RFC3339, f.value)
		if err != nil {
			return nil, taskList{}, fmt.Errorf("%s must be a time in RFC 3339, such as 2026-11-23T00:00:00Z.", f.name)
		}
		*f.out = parsed
	}
	page, err := t.tasks.ListTasks(ctx, opts)
	if err != nil {
		return nil, taskList{}, toolError(err)
	}
	out := taskList{Tasks: make([]taskAnswer, 0, len(page.Tasks)), HasMore: page.HasMore}
	for _, task := range page.Tasks {
		a := answer(task, 0)
		a.Message = ""
		a.Prompt, a.TaskType, a.Source = cut(task.Prompt, listPromptRunes), task.TaskType, task.Source
		out.Tasks = append(out.Tasks, a)
	}
	if page.HasMore && len(page.Tasks) > 0 {
		out.NextStartingAfter = page.Tasks[len(page.Tasks)-1].ID
	}
	return nil, out, nil
}

// read returns the task with the given id once it is final or the wait
// is over, as it is then. known is the task as last read, or nil. A
// failure of the wait that is not the server refusing the read (a lost
// connection, a server shutting down) answers the task as last known: it
// exists, and get_task reads it later.
func (t *tools) read(ctx context.Context, req *mcp.CallToolRequest, id string, known *client.Task, wait time.Duration) (*client.Task, error) {
	if known != nil && (known.Final() || wait == 0) {
		return known, nil
	}
	if wait > 0 {
		waitCtx, cancel := context.WithTimeout(ctx, wait)
		stop := t.reportProgress(waitCtx, req, wait)
		task, err := t.tasks.WaitTask(waitCtx, id, &client.WaitOptions{LongPoll: wait})
		cancel()
		stop()
		switch {
		case err == nil:
			return task, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case refused(err):
			return nil, err
		case task != nil:
			known = task
		}
	}
	// Not final within the wait: read the task as it is now.
	task, err := t.tasks.GetTask(ctx, id)
	if err != nil && known != nil && !refused(err) && ctx.Err() == nil {
		return known, nil
	}
	return task, err
}

// reportProgress sends the client of req, when its call asked for
// progress, a notification every progressEvery until ctx ends or stop is
// called: the seconds waited of the wait's, and a sentence. stop returns
// once no notification can follow, so none comes after the call's answer.
func (t *tools) reportProgress(ctx context.Context, req *mcp.CallToolRequest, wait time.Duration) (stop func()) {
	if req == nil || req.Session == nil || req.Params == nil || t.progressEvery <= 0 {
		return func() {}
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(t.progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			waited := time.Since(start).Round(time.Second)
			// A client that went away is told nothing more; the wait ends
			// with its context.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: waited.Seconds(), Total: wait.Seconds(),
				Message: fmt.Sprintf("Waiting for the verdict: %d of %d seconds.", int(waited.Seconds()), int(wait.Seconds())),
			})
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// refused reports whether err is the server refusing a request (4xx),
// which asking again would not change.
func refused(err error) bool {
	status := client.StatusCode(err)
	return status >= 400 && status < 500
}

// waitSeconds reads a wait_seconds argument, def when absent.
func waitSeconds(n *int, def int) (time.Duration, error) {
	s := def
	if n != nil {
		s = *n
	}
	if s < 0 || s > MaxWait {
		return 0, errors.New(errWaitSeconds)
	}
	return time.Duration(s) * time.Second, nil
}

// toolError is the error a tool answers for err: the API's sentence, with
// when to try again when the server said so, or what kept the server from
// answering.
func toolError(err error) error {
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr):
		msg := apiErr.Message
		if apiErr.RetryAfter > 0 && (apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode == http.StatusConflict) {
			msg += " Try again in " + approximately(apiErr.RetryAfter) + "."
		}
		return errors.New(msg)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errors.New("The call was cancelled before Arbiter answered.")
	}
	return fmt.Errorf("Arbiter could not be reached: %v", err)
}

// approximately says d in words, to the second under a minute and to the
// minute above.
func approximately(d time.Duration) string {
	plural := func(n int, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	if d < time.Minute {
		return plural(max(int((d+time.Second-1)/time.Second), 1), "second")
	}
	minutes := int((d + time.Minute - 1) / time.Minute)
	if minutes < 60 {
		return plural(minutes, "minute")
	}
	if minutes%60 == 0 {
		return plural(minutes/60, "hour")
	}
	return plural(minutes/60, "hour") + " " + plural(minutes%60, "minute")
}

// answer is the task as the tools answer it, with a sentence saying what it
// means; waited is how long the call waited for it.
func answer(task *client.Task, waited time.Duration) taskAnswer {
	a := taskAnswer{
		TaskID: task.ID, Status: task.Status, Verdict: task.FinalVerdict, Tier: task.FinalTier,
		Confidence: task.FinalConfidence, CreatedAt: rfc3339(&task.CreatedAt),
		CompletedAt: rfc3339(task.CompletedAt), DeadlineAt: rfc3339(task.DeadlineAt),
	}
	if task.Status == client.StatusCompleted && task.FinalTier != nil {
		a.Rationale = rationale(task)
	}
	a.Message = message(task, waited)
	return a
}

// rationale is the reason the deciding attempt gave: the last one of the
// final tier with the final verdict.
func rationale(task *client.Task) string {
	for i := len(task.Attempts) - 1; i >= 0; i-- {
		at := task.Attempts[i]
		if at.Tier == *task.FinalTier && at.Verdict != nil && task.FinalVerdict != nil && *at.Verdict == *task.FinalVerdict {
			return at.Rationale
		}
	}
	return ""
}

// message says what the task's state means for the model.
func message(task *client.Task, waited time.Duration) string {
	switch task.Status {
	case client.StatusCompleted:
		if task.FinalVerdict == nil || task.FinalTier == nil {
			return "The task is completed."
		}
		by := "a human reviewer"
		if *task.FinalTier == client.TierAgent {
			by = "the automated verifier"
		}
		return fmt.Sprintf("Decided: the verdict is %q, given by %s.", *task.FinalVerdict, by)
	case client.StatusExpired:
		return "The task expired: its deadline passed before anyone decided it, so there is no verdict. Ask again if the question still stands."
	}
	where := waitingFor(task.Status)
	not := "Not decided yet"
	if waited > 0 {
		not = fmt.Sprintf("Not decided within %s", approximately(waited))
	}
	return fmt.Sprintf("%s: the task is %s (%s). Do not ask again: call get_task with task_id %q (and wait_seconds up to %d) later to read the verdict.",
		not, task.Status, where, task.ID, MaxWait)
}

// waitingFor says what an open task waits for, by its status.
func waitingFor(status string) string {
	where := map[string]string{
		client.StatusPending:      "waiting for the automated verifier",
		client.StatusAgentRunning: "the automated verifier is answering",
		client.StatusHumanNeeded:  "waiting for a human reviewer, which may take minutes or hours",
	}[status]
	if where == "" {
		where = status
	}
	return where
}

// rfc3339 writes t in RFC 3339 (UTC, to the millisecond), or "" for nil.
func rfc3339(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// cut shortens s to at most n characters, marking the cut with an
// ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
