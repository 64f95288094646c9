/**
 * Where the framework adapters keep what they need to resume a run once:
 * which run and which pause a task answers, and whether it was resumed.
 */

import { isFinal, rationaleOf, type Task } from "./client.js";
import { ActionDigestMismatch, ActionNotApproved, actionDigest, type ApprovedAction } from "./integrity.js";

/**
 * The caller's small store behind an adapter. In production it is a table
 * of the application's database, e.g. `arbiter_resumes(task_id text
 * PRIMARY KEY, ref jsonb NOT NULL, resumed_at timestamptz)`: `remember`
 * inserts (`ON CONFLICT DO NOTHING`), `recall` reads `ref`, and `claim` is
 * `UPDATE … SET resumed_at = now() WHERE task_id = $1 AND resumed_at IS
 * NULL`, true when it changed a row: of any number of processes handed the
 * same decision, one resumes the run.
 */
export interface ResumeStore {
  remember(taskId: string, ref: Record<string, string>): Promise<void>;
  recall(taskId: string): Promise<Record<string, string> | undefined>;
  claim(taskId: string): Promise<boolean>;
}

/** A ResumeStore in this process's memory, for tests and single processes. */
export class MemoryResumeStore implements ResumeStore {
  private readonly refs = new Map<string, Record<string, string>>();
  private readonly claimed = new Set<string>();

  async remember(taskId: string, ref: Record<string, string>): Promise<void> {
    const had = this.refs.get(taskId);
    this.refs.set(taskId, { ...ref, ...had });
  }

  async recall(taskId: string): Promise<Record<string, string> | undefined> {
    const r = this.refs.get(taskId);
    return r ? { ...r } : undefined;
  }

  async claim(taskId: string): Promise<boolean> {
    if (this.claimed.has(taskId)) return false;
    this.claimed.add(taskId);
    return true;
  }
}

/** Arbiter's answer to a paused run. */
export interface Decision {
  taskId: string;
  status: string;
  /** The verdict; null when the task expired first. */
  verdict: string | null;
  tier: string | null;
  rationale: string;
  /**
   * The action the decision approved, for a task that asked about one (a
   * reviewer may have edited it); run it through approvedArgs, which
   * checks it.
   */
  action?: ApprovedAction;
}

/** The decision a final task holds. */
export function decisionOf(task: Task): Decision {
  if (!isFinal(task)) throw new Error(`task ${task.id} is not final`);
  const d: Decision = { taskId: task.id, status: task.status, verdict: task.final_verdict, tier: task.final_tier, rationale: rationaleOf(task) };
  if (task.approved_action) d.action = task.approved_action;
  return d;
}

/**
 * LangGraph's way of saying what a decision does with the action: "edit"
 * when the allowing verdict came with a reviewer's edit, "approve" without
 * one, "reject" otherwise.
 */
export function decisionType(d: Decision, allow = "approve"): "approve" | "edit" | "reject" {
  if (d.status !== "completed" || d.verdict !== allow) return "reject";
  return d.action?.edited ? "edit" : "approve";
}

/**
 * The arguments to run `name` with: the approved action's (a reviewer's
 * edits included), once checked. The call name(args) must be the one
 * asked about (its digest the proposal's) and the approved action's digest
 * its own. Throws ActionNotApproved when the decision approves no action,
 * and ActionDigestMismatch when either digest does not match: then nothing
 * must run.
 */
export async function approvedArgs(d: Decision, name: string, args: unknown, allow = "approve"): Promise<Record<string, unknown>> {
  const a = d.action;
  if (decisionType(d, allow) === "reject" || !a) throw new ActionNotApproved(`task ${d.taskId} approved no action (${d.verdict})`);
  let approved: string, called: string;
  try {
    approved = await actionDigest(a.name, a.args);
    called = await actionDigest(name, args);
  } catch (e) {
    throw new ActionDigestMismatch(`an action of task ${d.taskId} has no canonical form: ${(e as Error).message}`);
  }
  if (approved !== a.digest) throw new ActionDigestMismatch(`the approved action of task ${d.taskId} is not the one its digest names`);
  if (name !== a.name || called !== a.proposed_digest) {
    throw new ActionDigestMismatch(`the call of ${name} is not the one task ${d.taskId} asked about: its arguments changed`);
  }
  return { ...(a.args as Record<string, unknown>) };
}

/** The sentence a model sees when a call was not allowed. */
export function rejectionMessage(d: Decision): string {
  if (d.verdict === null) return "The call was not approved: nobody decided in time.";
  const who = d.tier === "human" ? "a reviewer" : "the verifier";
  return `The call was rejected by ${who} (${d.verdict}).${d.rationale ? ` Reason: ${d.rationale}` : ""}`;
}
