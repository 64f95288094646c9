/**
 * Where the framework adapters keep what they need to resume a run once:
 * which run and which pause a task answers, and whether it was resumed.
 */

import { isFinal, rationaleOf, type Task } from "./client.js";

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
}

/** The decision a final task holds. */
export function decisionOf(task: Task): Decision {
  if (!isFinal(task)) throw new Error(`task ${task.id} is not final`);
  return { taskId: task.id, status: task.status, verdict: task.final_verdict, tier: task.final_tier, rationale: rationaleOf(task) };
}

/** The sentence a model sees when a call was not allowed. */
export function rejectionMessage(d: Decision): string {
  if (d.verdict === null) return "The call was not approved: nobody decided in time.";
  const who = d.tier === "human" ? "a reviewer" : "the verifier";
  return `The call was rejected by ${who} (${d.verdict}).${d.rationale ? ` Reason: ${d.rationale}` : ""}`;
}
