package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/internal/jcs"
	"github.com/arbiterhq/arbiter/internal/mcptasks"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// A held call waits on an Arbiter task whose action is the call. Every
// request of the same call (the same client calling the same tool with
// the same arguments, while the call is held) attaches to it: a retry, the
// agent calling again after "still waiting", a client that asks for the
// call's MCP task. One goroutine waits for the decision; on approval it
// claims the call's execution in Arbiter and calls the upstream tool once
// with the approved arguments; every request attached gets the result.
// The call is forgotten once an answer reached the agent.

// Outcomes of a held call, as the log and traces say them.
const (
	outcomeApproved    = "approved"     // ran with the proposed arguments
	outcomeEdited      = "edited"       // ran with a reviewer's edit
	outcomeRejected    = "rejected"     // a verdict that does not run it
	outcomeExpired     = "expired"      // nobody decided before the deadline
	outcomeAlreadyRun  = "already_run"  // another claim ran it (a restart, another gateway)
	outcomeUpstreamErr = "upstream_err" // approved, and the upstream call failed
	outcomeFailed      = "failed"       // the gateway could not run it safely
)

// heldCall is a call waiting on an Arbiter task, shared by the requests
// attached to it.
type heldCall struct {
	key     string
	tool    string
	digest  string   // of the call as the agent sent it
	approve []string // the verdicts that run it
	line    int      // the policy rule that held it, 0 for the default
	claimID string   // this process's claim on its execution
	started time.Time

	// ready is closed once the task exists (taskID set) or could not be
	// made (err set).
	ready  chan struct{}
	taskID string
	err    error

	// done is closed once result and outcome are set.
	done    chan struct{}
	result  *mcp.CallToolResult
	outcome string

	mu        sync.Mutex
	last      *client.Task // the task as last read
	running   bool         // the upstream call is under way
	delivered bool
	doneAt    time.Time
}

// status says where the call is, for progress and MCP task handles.
func (h *heldCall) status() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.running:
		return "approved; running the call"
	case h.last == nil:
		return "waiting for a decision"
	}
	return fmt.Sprintf("waiting for a decision: the task is %s", h.last.Status)
}

// heldCalls are the calls the gateway holds, by key and by task.
type heldCalls struct {
	mu     sync.Mutex
	byKey  map[string]*heldCall
	byTask map[string]*heldCall
}

func (hc *heldCalls) init() {
	hc.byKey, hc.byTask = map[string]*heldCall{}, map[string]*heldCall{}
}

// finishedRetention is how long a call that ran, and whose answer no
// request took, is kept for the agent to call again.
const finishedRetention = 24 * time.Hour

// hold holds a call the policy asks about, and answers it once decided,
// or "still waiting" after the gateway's wait.
func (g *Gateway) hold(ctx context.Context, req *mcp.CallToolRequest, c incomingCall, d Decision) (*mcp.CallToolResult, error) {
	h, res := g.attach(ctx, c, d)
	if res != nil {
		return res, nil
	}
	return g.await(ctx, req, h)
}

// attach returns the held call of c: the one held now, the one the state
// file names (a restart, another gateway), or a new one with its task.
func (g *Gateway) attach(ctx context.Context, c incomingCall, d Decision) (*heldCall, *mcp.CallToolResult) {
	canonical, err := jcs.Canonicalize(c.args)
	if err != nil {
		return nil, toolError("The arguments of %s have no canonical JSON form (RFC 8785), which an approval is bound to: %v.", c.Tool, err)
	}
	digest := arbiter.ActionDigest(c.Tool, canonical)
	key := heldKey(g.cfg.UpstreamID, c.Client, c.Tool, digest)

	g.held.mu.Lock()
	g.pruneFinished()
	h, found := g.held.byKey[key]
	if !found {
		h = &heldCall{key: key, tool: c.Tool, digest: digest, approve: d.Ask.ApproveOrDefault(), line: d.Line,
			claimID: "gw-" + randomHex(12), started: time.Now(), ready: make(chan struct{}), done: make(chan struct{})}
		g.held.byKey[key] = h
	}
	g.held.mu.Unlock()
	if found {
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, toolError("The call was cancelled before its task was made.")
		}
		if h.err != nil {
			return nil, toolError("%s", h.err)
		}
		return h, nil
	}

	// A call held before this process started, or by another gateway
	// sharing the state file, waits on the task it made.
	taskID := ""
	if g.cfg.State != nil {
		if e, ok := g.cfg.State.FindKey(key); ok {
			taskID = e.TaskID
		}
	}
	if taskID == "" {
		taskID, err = g.createTask(ctx, c, d, canonical, digest, key)
	}
	g.held.mu.Lock()
	if err != nil {
		h.err = err
		delete(g.held.byKey, key)
	} else {
		h.taskID = taskID
		g.held.byTask[taskID] = h
	}
	g.held.mu.Unlock()
	close(h.ready)
	if err != nil {
		return nil, toolError("%s", err)
	}
	g.log.Info("gateway: holding a call", "tool", c.Tool, "task", taskID, "rule_line", d.Line)
	g.wg.Go(func() { g.decide(h) })
	return h, nil
}

// heldKey is the key of a call: the same for the same upstream, client,
// tool and arguments.
func heldKey(upstream, client, tool, digest string) string {
	sum := sha256.Sum256([]byte(upstream + "\x00" + client + "\x00" + tool + "\x00" + digest))
	return hex.EncodeToString(sum[:16])
}

// createTask creates the task of a held call, and records it in the state
// file. Its idempotency key is the call's session and JSON-RPC request id
// (and digest): a request the client sends again attaches to it.
func (g *Gateway) createTask(ctx context.Context, c incomingCall, d Decision, args json.RawMessage, digest, key string) (string, error) {
	tool := g.tool(c.Tool)
	var schema json.RawMessage
	description := ""
	if tool != nil {
		schema, _ = json.Marshal(tool.InputSchema)
		description = tool.Description
	}
	in := createOf(d.Ask, c.Tool, args, schema)
	in.Prompt = g.prompt(c)
	in.Source = "arbiter-gateway"
	in.Context = map[string]any{
		"tool":        c.Tool,
		"description": description,
		"server":      g.cfg.UpstreamName,
		"client":      map[string]string{"name": c.Client, "version": c.version},
		"policy_rule": d.Line,
	}
	requestID := c.requestID
	if requestID == "" {
		requestID = randomHex(8)
	}
	sum := sha256.Sum256([]byte(g.cfg.UpstreamID + "\x00" + c.session + "\x00" + requestID + "\x00" + digest))
	in.IdempotencyKey = "arbiter-gateway:" + hex.EncodeToString(sum[:16])
	task, err := g.cfg.Arbiter.CreateTask(ctx, in)
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.Field == "action.schema" {
		// A schema Arbiter cannot use (another draft, a remote
		// reference) does not keep the call from being asked.
		g.log.Warn("gateway: Arbiter refused the tool's input schema; asking without it", "tool", c.Tool, "reason", apiErr.Message)
		in.Action.Schema = nil
		task, err = g.cfg.Arbiter.CreateTask(ctx, in)
	}
	if err != nil {
		g.log.Warn("gateway: could not create the task of a held call", "tool", c.Tool, "error", err)
		return "", fmt.Errorf("The call needs a person's approval, and Arbiter could not take the question: %s The call was not made.", sentence(err))
	}
	if task.Action == nil || task.Action.Digest != digest {
		return "", fmt.Errorf("Arbiter's digest of the call is not the gateway's (task %s); the call was not made.", task.ID)
	}
	if g.cfg.State != nil {
		if err := g.cfg.State.Put(stateEntry{Key: key, TaskID: task.ID, Tool: c.Tool, Digest: digest,
			Approve: d.Ask.ApproveOrDefault(), Line: d.Line, CreatedAt: time.Now()}); err != nil {
			g.log.Warn("gateway: the state file could not record a held call", "task", task.ID, "error", err)
		}
	}
	return task.ID, nil
}

// prompt is the question of a held call's task: the tool, the server and
// the agent's client.
func (g *Gateway) prompt(c incomingCall) string {
	who := "An agent"
	if c.Client != "" {
		who = "The agent's MCP client " + c.Client
	}
	return fmt.Sprintf("%s wants to call the tool %s on %s. Approve this call, with the arguments shown?", who, c.Tool, g.cfg.UpstreamName)
}

// sentence is an error's sentence for the model: the API's sentence, or
// the error's text.
func sentence(err error) string {
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		return apiErr.Message
	}
	s := err.Error()
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// await waits for h's answer on behalf of one request: until it is
// decided (and run), the gateway's wait, or the request's end. While it
// waits it reports progress to a client that asked for it.
func (g *Gateway) await(ctx context.Context, req *mcp.CallToolRequest, h *heldCall) (*mcp.CallToolResult, error) {
	token := req.Params.GetProgressToken()
	tick := time.NewTicker(g.cfg.ProgressEvery)
	defer tick.Stop()
	limit := time.NewTimer(g.cfg.Wait)
	defer limit.Stop()
	began := time.Now()
	for {
		select {
		case <-h.done:
			g.deliver(h)
			return h.answer(), nil
		case <-tick.C:
			if token != nil && req.Session != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
					Progress: time.Since(began).Seconds(), Message: fmt.Sprintf("Held for approval: task %s, %s.", h.taskID, h.status())})
			}
		case <-limit.C:
			g.log.Info("gateway: a held call answered still waiting", "tool", h.tool, "task", h.taskID, "wait", elapsed(began))
			return toolError("Still waiting: task %s has no decision yet (%s). The call has not run. Call %s again with the same arguments to keep waiting; it runs once, after it is approved.",
				h.taskID, h.status(), h.tool), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answer returns h's answer, once it is done, as a result of its own: the
// SDK writes into the result it sends, and several requests may wait for
// the same held call (a retry, tasks/result), each sending its copy.
func (h *heldCall) answer() *mcp.CallToolResult {
	res := *h.result
	return &res
}

// deliver records that an answer of h reached the agent: the call is
// forgotten, in memory and in the state file, and the same call made
// again is a new one.
func (g *Gateway) deliver(h *heldCall) {
	h.mu.Lock()
	first := !h.delivered
	h.delivered = true
	h.mu.Unlock()
	if !first {
		return
	}
	g.held.mu.Lock()
	if g.held.byKey[h.key] == h {
		delete(g.held.byKey, h.key)
	}
	g.held.mu.Unlock()
	if g.cfg.State != nil {
		if err := g.cfg.State.Remove(h.key, h.taskID); err != nil {
			g.log.Warn("gateway: the state file could not forget an answered call", "task", h.taskID, "error", err)
		}
	}
}

// pruneFinished forgets the calls that ran long ago and whose answer no
// request took. The caller holds g.held.mu.
func (g *Gateway) pruneFinished() {
	for key, h := range g.held.byKey {
		h.mu.Lock()
		old := !h.doneAt.IsZero() && time.Since(h.doneAt) > finishedRetention
		h.mu.Unlock()
		if old {
			delete(g.held.byKey, key)
			delete(g.held.byTask, h.taskID)
		}
	}
}

// decide waits for h's task to be final, then answers h: runs the call
// once if the task approved it, or says why not.
func (g *Gateway) decide(h *heldCall) {
	ctx, span := telemetry.Tracer().Start(g.ctx, "gateway.held_call", trace.WithAttributes(
		attribute.String("mcp.tool.name", h.tool), attribute.String("arbiter.task_id", h.taskID)))
	var task *client.Task
	for wait := time.Second; ; wait = min(wait*2, 30*time.Second) {
		t, err := g.cfg.Arbiter.WaitTask(ctx, h.taskID, nil)
		if ctx.Err() != nil {
			span.End()
			return // the gateway closes; the task and the state file stay
		}
		if t != nil {
			h.mu.Lock()
			h.last = t
			h.mu.Unlock()
		}
		if err == nil && t.Final() {
			task = t
			break
		}
		if client.IsNotFound(err) {
			g.finish(span, h, toolError("Task %s of this call is not in Arbiter's account (deleted, or another key's): the call was not made.", h.taskID), outcomeFailed)
			return
		}
		g.log.Warn("gateway: reading a held call's task failed; trying again", "task", h.taskID, "error", err)
		select {
		case <-ctx.Done():
			span.End()
			return
		case <-time.After(wait):
		}
	}
	res, outcome := g.resolve(ctx, h, task)
	g.finish(span, h, res, outcome)
}

// finish sets h's answer and logs the held call: tool, task, wait and
// outcome, never the arguments' values.
func (g *Gateway) finish(span trace.Span, h *heldCall, res *mcp.CallToolResult, outcome string) {
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[mcptasks.RelatedTaskMeta] = map[string]string{"taskId": h.taskID}
	// The log line and the span end before the answer leaves, so that
	// whoever has the answer finds both.
	wait := elapsed(h.started)
	g.log.Info("gateway: held call", "tool", h.tool, "task", h.taskID, "wait", wait, "outcome", outcome, "rule_line", h.line)
	span.SetAttributes(attribute.String("arbiter.gateway.outcome", outcome), attribute.Int64("arbiter.gateway.wait_ms", wait.Milliseconds()))
	if outcome == outcomeFailed || outcome == outcomeUpstreamErr {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
	h.mu.Lock()
	h.result, h.outcome, h.running, h.doneAt = res, outcome, false, time.Now()
	h.mu.Unlock()
	close(h.done)
}

// resolve answers a held call whose task is final.
func (g *Gateway) resolve(ctx context.Context, h *heldCall, task *client.Task) (*mcp.CallToolResult, string) {
	if task.Status == client.StatusExpired {
		return toolError("Nobody decided task %s before its deadline, and it expired: the call was not made.", task.ID), outcomeExpired
	}
	verdict := *task.FinalVerdict
	if !slices.Contains(h.approve, verdict) {
		return toolError("%s The call was not made.", rejection(task)), outcomeRejected
	}
	approved, err := task.ApprovedAction(h.approve...)
	if err != nil {
		g.log.Error("gateway: an approved task's action does not check", "task", task.ID, "error", err)
		return toolError("Task %s approved the call, but its approved action does not match its digest: the call was not made.", task.ID), outcomeFailed
	}
	if approved.Name != h.tool {
		return toolError("Task %s approved another tool (%s) than this call's: the call was not made.", task.ID, approved.Name), outcomeFailed
	}
	// What goes upstream is exactly the approved args, whose digest is
	// the approved digest.
	if d, err := client.ActionDigest(approved.Name, approved.Args); err != nil || d != approved.Digest {
		return toolError("Task %s's approved arguments do not match its digest: the call was not made.", task.ID), outcomeFailed
	}
	if err := g.claim(ctx, task, approved.Digest, h); err != nil {
		if client.IsAlreadyExecuted(err) {
			return toolError("This call was approved (task %s) and has already run, or is running, elsewhere: %s It is not run again; its result is not available here.", task.ID, sentence(err)), outcomeAlreadyRun
		}
		g.log.Error("gateway: could not claim an approved call's execution", "task", task.ID, "error", err)
		return toolError("Task %s approved the call, but Arbiter could not record that it runs, so it was not run: %s Call the tool again to try once more.", task.ID, sentence(err)), outcomeFailed
	}
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
	res, err := g.up.CallTool(ctx, &mcp.CallToolParams{Name: approved.Name, Arguments: approved.Args})
	if err != nil {
		return toolError("Task %s approved the call; the upstream server failed it: %s", task.ID, sentence(err)), outcomeUpstreamErr
	}
	if approved.Edited {
		res.Content = append(res.Content, &mcp.TextContent{Text: editNote(task.ID, approved)})
		return res, outcomeEdited
	}
	return res, outcomeApproved
}

// claim claims the execution of the task's approved action for h, trying
// again for a minute while Arbiter does not answer: the claim is h's own
// (its claim id), so a claim whose answer was lost holds when sent again.
func (g *Gateway) claim(ctx context.Context, task *client.Task, digest string, h *heldCall) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for wait := 500 * time.Millisecond; ; wait = min(wait*2, 10*time.Second) {
		_, err := g.cfg.Arbiter.ClaimExecution(ctx, task.ID, client.ExecutionClaim{
			Digest: digest, ClaimID: h.claimID, Executor: g.cfg.Executor, Verdicts: h.approve})
		var apiErr *client.Error
		if err == nil || errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// rejection says why a task's verdict does not run the call, with the
// reason its decider gave.
func rejection(task *client.Task) string {
	verdict, tier := *task.FinalVerdict, ""
	if task.FinalTier != nil {
		tier = *task.FinalTier
	}
	reason := ""
	for i := len(task.Attempts) - 1; i >= 0; i-- {
		a := task.Attempts[i]
		if !a.Audit && a.Verdict != nil && *a.Verdict == verdict {
			reason = strings.TrimSpace(a.Rationale)
			break
		}
	}
	var who string
	switch tier {
	case client.TierHuman:
		who = "A reviewer"
	case client.TierAgent:
		who = "Arbiter's verifier"
	case client.TierFallback:
		return fmt.Sprintf("Nobody decided task %s before its deadline; its on-expiry outcome is %q.", task.ID, verdict)
	default:
		who = "Arbiter"
	}
	if reason == "" {
		return fmt.Sprintf("%s decided %q on task %s, which does not approve the call; no reason was given.", who, verdict, task.ID)
	}
	return fmt.Sprintf("%s decided %q on task %s, which does not approve the call. The reason: %s", who, verdict, task.ID, reason)
}

// editNote tells the model the call ran with arguments a reviewer edited.
func editNote(taskID string, a *client.ApprovedAction) string {
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(a.Patch, &ops)
	var changes []string
	for _, op := range ops {
		changes = append(changes, fmt.Sprintf("%s = %s", strings.TrimPrefix(op.Path, "/"), op.Value))
	}
	return fmt.Sprintf("Note from the Arbiter gateway: a reviewer edited the arguments before approving (task %s); the call ran with %s. Arguments as run: %s",
		taskID, strings.Join(changes, ", "), a.Args)
}
