/**
 * The AI SDK: a `toolApproval` rule that asks Arbiter, and the decision fed
 * back into the conversation once.
 *
 * ```ts
 * const approvals = new ArbiterToolApproval({ arbiter, store });
 * const result = await generateText({ model, tools, messages,
 *   toolApproval: approvals.rule(conversationId) });
 * messages.push(...result.responseMessages);
 * await approvals.submit(result.content, conversationId);   // remember the pauses
 * // later, with the decided task (a webhook or waitTask):
 * const reply = await approvals.response(task);             // undefined when already used
 * if (reply) { messages.push(reply); await generateText({ model, tools, messages, ... }); }
 * ```
 *
 * The verifier's confident verdict answers `approved` or `denied` at once;
 * a task routed to a person answers `user-approval`, and `response` turns
 * the person's decision into the `tool-approval-response` message. A
 * task's idempotency key is `ai:{conversation}:{toolCallId}`. Each task
 * carries the call as its `action` (`editable` names, per tool, the
 * arguments a reviewer may change): wrap a tool's `execute` with
 * `approvals.guard(conversationId, toolName, execute)` and it runs with the
 * approved arguments, a reviewer's edits included, and refuses
 * (ActionDigestMismatch, nothing run) a call whose arguments are not the
 * ones approved.
 */

import type { ToolApprovalStatus, ToolModelMessage } from "ai";

import { Arbiter, isFinal, type Task, type TaskCreate } from "./client.js";
import { askAboutCall, checkCall } from "./integrity.js";
import { decisionOf, rejectionMessage, type ResumeStore } from "./resume.js";

export { MemoryResumeStore, type ResumeStore } from "./resume.js";

/** Options of ArbiterToolApproval. */
export interface ArbiterToolApprovalOptions {
  arbiter: Arbiter;
  store: ResumeStore;
  /** The task's allowed verdicts (default approve, reject). */
  verdicts?: string[];
  /** The verdict that lets the call run (default approve). */
  allow?: string;
  /** Whole seconds to wait for the verifier before asking a person (default 5). */
  agentWaitSeconds?: number;
  /** The question asked for a tool call. */
  prompt?: (toolName: string, input: unknown) => string;
  /** Per tool, the arguments a reviewer may change before approving. */
  editable?: Record<string, string[]>;
  /** Per tool, the JSON Schema its arguments (and every edit) satisfy. */
  schemas?: Record<string, Record<string, unknown>>;
  /** Create fields for every task (task_type, deadline_seconds, callback_url, …). */
  fields?: Omit<TaskCreate, "prompt" | "allowed_verdicts" | "context" | "action">;
}

const REASON_PREFIX = "arbiter:";

/**
 * What the rule reads of the AI SDK's approval call: the tool call. Any
 * `GenericToolApprovalFunction`'s options have it, so the rule fits every
 * tool set and context.
 */
export interface ToolApprovalOptions {
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** Asks Arbiter whether the AI SDK's tool calls may run. */
export class ArbiterToolApproval {
  private readonly o: Required<Omit<ArbiterToolApprovalOptions, "fields">> & { fields: ArbiterToolApprovalOptions["fields"] };

  constructor(opts: ArbiterToolApprovalOptions) {
    this.o = {
      verdicts: ["approve", "reject"],
      allow: "approve",
      agentWaitSeconds: 5,
      prompt: (name) => `May the assistant call ${name}?`,
      editable: {},
      schemas: {},
      ...opts,
      fields: opts.fields,
    };
    if (!this.o.verdicts.includes(this.o.allow)) throw new Error("allow must be one of verdicts");
  }

  private async ask(conversationId: string, toolCallId: string, toolName: string, input: unknown): Promise<Task> {
    let task = await askAboutCall(this.o.arbiter, this.o, toolName, input,
      { ...this.o.fields, prompt: this.o.prompt(toolName, input), allowed_verdicts: this.o.verdicts, context: { tool: toolName, input } },
      `ai:${conversationId}:${toolCallId}`);
    await this.o.store.remember(task.id, { conversationId, toolCallId });
    if (!isFinal(task) && this.o.agentWaitSeconds > 0) task = await this.o.arbiter.getTask(task.id, { wait: this.o.agentWaitSeconds });
    return task;
  }

  /**
   * A tool's `execute` that runs only the call its task approved: with the
   * approved arguments (a reviewer's edits included), never for a call whose
   * arguments are not the ones Arbiter was asked about
   * (ActionDigestMismatch; ActionNotApproved for a call no task approved).
   */
  guard<I, O>(conversationId: string, toolName: string, execute: (input: I, options: { toolCallId: string }) => Promise<O> | O) {
    return async (input: I, options: { toolCallId: string }): Promise<O> => {
      const task = await this.ask(conversationId, options.toolCallId, toolName, input);
      const approved = await checkCall(task, toolName, input, this.o.allow);
      return execute(approved.args as I, options);
    };
  }

  /** The `toolApproval` of one conversation's generateText / streamText calls. */
  rule(conversationId: string): (options: ToolApprovalOptions) => Promise<ToolApprovalStatus> {
    return async ({ toolCall }) => {
      const task = await this.ask(conversationId, toolCall.toolCallId, toolCall.toolName, toolCall.input);
      if (task.status === "completed" && task.final_tier === "agent") {
        // The verifier decided: the SDK records it, and the task is done with.
        await this.o.store.claim(task.id);
        const d = decisionOf(task);
        return d.verdict === this.o.allow ? { type: "approved", reason: d.rationale } : { type: "denied", reason: rejectionMessage(d) };
      }
      return { type: "user-approval", reason: REASON_PREFIX + task.id };
    };
  }

  /**
   * Remembers the approval requests of a result's content that wait for a
   * person, so that `response` can answer them; returns their tasks' ids.
   */
  async submit(content: ReadonlyArray<{ type: string }>, conversationId: string): Promise<string[]> {
    const ids: string[] = [];
    for (const part of content) {
      if (part.type !== "tool-approval-request") continue;
      const p = part as unknown as { approvalId: string; reason?: string; isAutomatic?: boolean; toolCall: { toolCallId: string } };
      if (p.isAutomatic || !p.reason?.startsWith(REASON_PREFIX)) continue;
      const taskId = p.reason.slice(REASON_PREFIX.length);
      await this.o.store.remember(taskId, { conversationId, toolCallId: p.toolCall.toolCallId, approvalId: p.approvalId });
      ids.push(taskId);
    }
    return ids;
  }

  /**
   * The `tool-approval-response` message for a decided task, to push onto
   * the conversation before calling the model again; undefined when the
   * task is not final, not a pause submitted here, or already answered
   * (the decision arrived twice).
   */
  async response(task: Task): Promise<ToolModelMessage | undefined> {
    if (!isFinal(task)) return undefined;
    const ref = await this.o.store.recall(task.id);
    if (!ref?.approvalId || !(await this.o.store.claim(task.id))) return undefined;
    const d = decisionOf(task);
    const approved = d.verdict === this.o.allow;
    return {
      role: "tool",
      content: [{ type: "tool-approval-response", approvalId: ref.approvalId, approved, reason: approved ? d.rationale : rejectionMessage(d) }],
    };
  }
}
