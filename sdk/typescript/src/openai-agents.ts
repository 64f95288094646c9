/**
 * The OpenAI Agents SDK (JS): a tool's `needsApproval` asks Arbiter, and a
 * paused run is resumed with Arbiter's decision, once.
 *
 * ```ts
 * const approvals = new ArbiterApprovals({ arbiter, store });
 * const refund = tool({ name: "issue_refund", parameters, execute,
 *   needsApproval: approvals.needsApproval("issue_refund") });
 * const result = await run(agent, "Refund ord_1", { context: { runId } });
 * if (result.interruptions.length) {
 *   await approvals.submit(result.interruptions, runId);   // one task per item
 *   save(runId, result.state.toString());                  // the RunState is yours
 * }
 * // later, with the decided task (a webhook or waitTask):
 * const resumed = await approvals.resume(agent, load(runId), task);
 * ```
 *
 * The policy asks Arbiter when the model calls the tool: the verifier's
 * allowing verdict lets the call run at once; anything else pauses the run.
 * Each task carries the call as its `action` (`editable` names, per tool,
 * the arguments a reviewer may change): `approvals.guard(tool)` makes the
 * tool run with the approved arguments, a reviewer's edits included, and
 * refuse (ActionDigestMismatch, nothing run) a call whose arguments are not
 * the ones approved.
 * A task's idempotency key is `openai-agents:{runId}:{callId}`, so the
 * policy, `submit` and a restarted process reach the same task. `resume`
 * approves the item (or rejects it with the decider's rationale as the
 * message the model sees) and continues the run once per task.
 */

import { run, RunState, type Agent, type FunctionTool, type RunContext, type RunToolApprovalItem } from "@openai/agents";

import { Arbiter, isFinal, type Task, type TaskCreate } from "./client.js";
import { ActionDigestMismatch, askAboutCall, checkCall } from "./integrity.js";
import { decisionOf, rejectionMessage, type ResumeStore } from "./resume.js";

export { MemoryResumeStore, type ResumeStore } from "./resume.js";

/** Options of ArbiterApprovals. */
export interface ArbiterApprovalsOptions {
  arbiter: Arbiter;
  store: ResumeStore;
  verdicts?: string[];
  /** The verdict that lets the call run (default approve). */
  allow?: string;
  /** Whole seconds the policy waits for the verifier before pausing (default 5). */
  agentWaitSeconds?: number;
  /** The run id of a call: default `runId` of the context given to run(). */
  runId?: (ctx: RunContext) => string;
  prompt?: (toolName: string, args: unknown) => string;
  /** Per tool, the arguments a reviewer may change before approving. */
  editable?: Record<string, string[]>;
  /** Per tool, the JSON Schema its arguments (and every edit) satisfy. */
  schemas?: Record<string, Record<string, unknown>>;
  fields?: Omit<TaskCreate, "prompt" | "allowed_verdicts" | "context" | "action">;
}

function runIdFromContext(ctx: RunContext): string {
  const c = ctx.context as { runId?: unknown } | undefined;
  if (!c || typeof c.runId !== "string" || c.runId === "") throw new Error("the run's context needs a runId (run(agent, input, { context: { runId } }))");
  return c.runId;
}

/** Asks Arbiter whether tool calls may run. */
export class ArbiterApprovals {
  private readonly o: Required<Omit<ArbiterApprovalsOptions, "fields">> & Pick<ArbiterApprovalsOptions, "fields">;

  constructor(opts: ArbiterApprovalsOptions) {
    this.o = {
      verdicts: ["approve", "reject"],
      allow: "approve",
      agentWaitSeconds: 5,
      runId: runIdFromContext,
      prompt: (name) => `May the agent call ${name}?`,
      editable: {},
      schemas: {},
      ...opts,
      fields: opts.fields,
    };
    if (!this.o.verdicts.includes(this.o.allow)) throw new Error("allow must be one of verdicts");
  }

  private async ask(runId: string, callId: string, toolName: string, args: unknown): Promise<Task> {
    const task = await askAboutCall(this.o.arbiter, this.o, toolName, args,
      { ...this.o.fields, prompt: this.o.prompt(toolName, args), allowed_verdicts: this.o.verdicts, context: { tool: toolName, arguments: args } },
      `openai-agents:${runId}:${callId}`);
    await this.o.store.remember(task.id, { runId, callId });
    return task;
  }

  /**
   * Makes the tool run only the call its task approved: with the approved
   * arguments (a reviewer's edits included), and never for a call whose
   * arguments are not the ones Arbiter was asked about
   * (ActionDigestMismatch; ActionNotApproved for a call no task approved).
   * The call's task is found again by its idempotency key, which the
   * server keeps for its retention (24 hours by default); after it the
   * call is refused. Returns the tool, changed in place.
   */
  guard<T extends FunctionTool<any, any, any>>(t: T): T {
    const invoke = t.invoke.bind(t);
    t.invoke = async (ctx, input, details) => {
      const callId = (details?.toolCall as { callId?: string } | undefined)?.callId;
      if (!callId) throw new ActionDigestMismatch(`the call of ${t.name} has no call id to find its task by`);
      const args = JSON.parse(input || "{}") as unknown;
      const task = await this.ask(this.o.runId(ctx), callId, t.name, args);
      const approved = await checkCall(task, t.name, args, this.o.allow);
      return invoke(ctx, JSON.stringify(approved.args), details);
    };
    return t;
  }

  /** The `needsApproval` of the tool named toolName. */
  needsApproval(toolName: string): (ctx: RunContext, input: unknown, callId?: string) => Promise<boolean> {
    return async (ctx, input, callId) => {
      if (!callId) return true;
      let task = await this.ask(this.o.runId(ctx), callId, toolName, input);
      if (!isFinal(task) && this.o.agentWaitSeconds > 0) task = await this.o.arbiter.getTask(task.id, { wait: this.o.agentWaitSeconds });
      const allowed = task.status === "completed" && task.final_verdict === this.o.allow;
      if (allowed) await this.o.store.claim(task.id);
      return !allowed;
    };
  }

  /** One Arbiter task per approval item of a paused run (re-attached by key). */
  async submit(items: RunToolApprovalItem[], runId: string): Promise<Task[]> {
    const tasks: Task[] = [];
    for (const item of items) {
      const raw = item.rawItem as { callId?: string };
      if (!raw.callId || !item.name) continue;
      tasks.push(await this.ask(runId, raw.callId, item.name, JSON.parse(item.arguments ?? "{}")));
    }
    return tasks;
  }

  /**
   * Approves or rejects the items the decided tasks answer and continues
   * the run; `state` is the RunState kept when the run paused, or its
   * toString(). Undefined when no task given is final, known to this store
   * and not used already.
   */
  async resume<A extends Agent<any, any>>(agent: A, state: RunState<any, A> | string, decided: Task | Task[]) {
    const s = typeof state === "string" ? await RunState.fromString(agent, state) : state;
    const byCall = new Map(s.getInterruptions().map((i) => [(i.rawItem as { callId?: string }).callId, i]));
    let acted = false;
    for (const task of Array.isArray(decided) ? decided : [decided]) {
      const ref = await this.o.store.recall(task.id);
      const item = ref ? byCall.get(ref.callId) : undefined;
      if (!isFinal(task) || !item || !(await this.o.store.claim(task.id))) continue;
      const d = decisionOf(task);
      if (d.verdict === this.o.allow) s.approve(item);
      else s.reject(item, { message: rejectionMessage(d) });
      acted = true;
    }
    return acted ? run(agent, s) : undefined;
  }
}
