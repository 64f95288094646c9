/**
 * LangGraph JS: a node asks Arbiter through `interrupt()`, and the thread
 * resumes with `Command({ resume })` once Arbiter has an answer, once.
 *
 * ```ts
 * const refund = async (state) => {
 *   const args = { order: state.order, amount: 42.5 };
 *   const d = askArbiter(`Refund ${state.order}?`, ["approve", "reject"], undefined,
 *     { action: { name: "issue_refund", args, editable: ["amount"] } });
 *   if (decisionType(d) !== "reject") await issueRefund(await approvedArgs(d, "issue_refund", args));
 *   return { outcome: d.verdict };
 * };
 * const bridge = new LangGraphBridge({ arbiter, store });
 * await graph.invoke({ order: "ord_1" }, config);      // pauses at the interrupt
 * await bridge.submit(graph, config);                   // one task per pause
 * // later, with the decided task (a webhook or waitTask):
 * await bridge.resume(graph, task);                     // Command({ resume }) once
 * ```
 *
 * A task's idempotency key is `langgraph:{threadId}:{interruptId}`, so a
 * restarted process that submits the same paused thread re-attaches to its
 * task; `resume` resumes a thread once per task however often the
 * decision arrives (ResumeStore.claim).
 */

import { Command, interrupt } from "@langchain/langgraph";

import { Arbiter, isFinal, type Task, type TaskCreate } from "./client.js";
import { decisionOf, type Decision, type ResumeStore } from "./resume.js";

export { MemoryResumeStore, approvedArgs, decisionType, type Decision, type ResumeStore } from "./resume.js";

/** The key of an interrupt's value that holds an Arbiter question. */
export const QUESTION = "arbiter";

/** What a question carries besides its prompt, verdicts and context. */
export type QuestionFields = Omit<TaskCreate, "prompt" | "allowed_verdicts" | "context">;

/**
 * Pauses the graph with an Arbiter question and returns the decision when
 * the thread is resumed. As with any interrupt(), the node runs again from
 * its start on resume.
 */
export function askArbiter(prompt: string, allowedVerdicts: string[], context?: unknown, fields: QuestionFields = {}): Decision {
  return interrupt({ [QUESTION]: { ...fields, prompt, allowed_verdicts: allowedVerdicts, context } }) as Decision;
}

/** What the bridge needs of a compiled graph with a checkpointer. */
export interface ResumableGraph {
  getState(config: { configurable: { thread_id: string } }): Promise<{ tasks: ReadonlyArray<{ interrupts: ReadonlyArray<{ id?: string; value?: unknown }> }> }>;
  invoke(input: unknown, config: { configurable: { thread_id: string } }): Promise<unknown>;
}

/** Turns a graph's Arbiter interrupts into tasks and decisions into resumes. */
export class LangGraphBridge {
  readonly arbiter: Arbiter;
  private readonly store: ResumeStore;

  constructor(opts: { arbiter: Arbiter; store: ResumeStore }) {
    this.arbiter = opts.arbiter;
    this.store = opts.store;
  }

  /** Asks Arbiter once for each Arbiter interrupt the thread is paused on. */
  async submit(graph: ResumableGraph, config: { configurable: { thread_id: string } }): Promise<Task[]> {
    const threadId = config.configurable.thread_id;
    const state = await graph.getState(config);
    const tasks: Task[] = [];
    for (const intr of state.tasks.flatMap((t) => t.interrupts)) {
      const q = (intr.value as Record<string, unknown> | undefined)?.[QUESTION] as TaskCreate | undefined;
      if (!q || !intr.id) continue;
      const task = await this.arbiter.createTask(q, { idempotencyKey: `langgraph:${threadId}:${intr.id}` });
      await this.store.remember(task.id, { threadId, interruptId: intr.id });
      tasks.push(task);
    }
    return tasks;
  }

  /**
   * Resumes the thread the decided task pauses, and returns what the graph
   * returns; undefined when the task is not final, not one of this
   * store's, or its thread was already resumed.
   */
  async resume(graph: ResumableGraph, task: Task): Promise<unknown> {
    if (!isFinal(task)) return undefined;
    const ref = await this.store.recall(task.id);
    if (!ref || !(await this.store.claim(task.id))) return undefined;
    const config = { configurable: { thread_id: ref.threadId! } };
    return graph.invoke(new Command({ resume: { [ref.interruptId!]: decisionOf(task) } }), config);
  }
}
