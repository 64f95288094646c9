/**
 * The client of the Arbiter API. Every create carries an idempotency key
 * (the caller's, or one made per call), so a create whose answer was lost
 * is retried without making a second task.
 */

import type { components } from "./wire.js";
import { APIConnectionError, ArbiterError, errorFor } from "./errors.js";

/** A task as the wire types say it. */
type WireTask = components["schemas"]["Task"];

/**
 * A verification task as the API answers it. `V` narrows the verdicts: a
 * task asked with `ask(prompt, ["approve", "reject"])` is a
 * `Task<"approve" | "reject">`, whose `final_verdict` is one of them or null.
 */
export type Task<V extends string = string> = Omit<WireTask, "allowed_verdicts" | "final_verdict" | "gold_verdict"> & {
  /** The answers allowed, as created. */
  allowed_verdicts: V[];
  /** The decision, one of allowed_verdicts; null until the task is completed. */
  final_verdict: V | null;
  /** A gold task's known answer, in the account's own reads only. */
  gold_verdict?: V;
};
/** One verifier call or one person's decision on a task. */
export type Attempt = components["schemas"]["Attempt"];
/** A task's status; later servers may add values. */
export type TaskStatus = components["schemas"]["TaskStatus"];
/** The body of a task create. */
export type TaskCreate = components["schemas"]["TaskCreate"];
/** One item of a batch create: a task create and its own idempotency key. */
export type TaskBatchItem = components["schemas"]["TaskBatchItem"];

/** How the account handles tasks of one task_type ("default": every type without its own). */
export type Policy = components["schemas"]["Policy"];
/** The body of a policy put: each field left out or null is not set. */
export type PolicyPut = components["schemas"]["PolicyPut"];

/** The outcome of one item of a batch: the task, or the item's error. */
export type TaskResult =
  | { ok: true; status: 200; task: Task; replayed: boolean }
  | { ok: false; status: number; error: ArbiterError };

/** Who decided a completed task: agent, human, or fallback (its on-expiry outcome, at the deadline). */
export type Tier = components["schemas"]["Tier"];

/** The filters of listTasks, as the API's query names them. */
export interface ListFilters {
  status?: TaskStatus;
  task_type?: string;
  source?: string;
  touchpoint?: string;
  final_tier?: Tier;
  created_after?: number;
  created_before?: number;
  /** The page size, 1 to 100 (the server's 20 when left out). */
  limit?: number;
  /** The id of the task after which the page starts: a page's starting_after. */
  starting_after?: string;
}

/** One page of the account's tasks, newest first. */
export interface TaskPage extends AsyncIterable<Task> {
  /** This page's tasks. */
  tasks: Task[];
  /** Whether older tasks follow. */
  has_more: boolean;
  /** The cursor of the next page (the last task's id); undefined when none follows. */
  starting_after: string | undefined;
  /** The next page, or undefined when this one is the last. */
  nextPage(): Promise<TaskPage | undefined>;
}

/**
 * What listTasks returns: awaited, the first page; iterated with `for
 * await`, every matching task, page after page.
 */
export interface TaskPager extends PromiseLike<TaskPage>, AsyncIterable<Task> {}

/** Options of a client. */
export interface ArbiterOptions {
  /** The API key; default SVC_API_KEY, else ARBITER_API_KEY. */
  apiKey?: string;
  /** The server; default SVC_BASE_URL, else ARBITER_BASE_URL, else http://localhost:8080. */
  baseURL?: string;
  /** Each request's limit in ms (a long-poll gets its wait on top); default 30 s. */
  timeoutMs?: number;
  /** Retries of 429, 5xx, 409 and lost connections; default 3. */
  maxRetries?: number;
  /** The longest Retry-After waited out, in ms; default 60 s. */
  maxRetryWaitMs?: number;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
}

/** The task was not final within the time the caller gave. */
export class WaitTimeout extends ArbiterError {
  constructor(
    message: string,
    /** The task as last read, if it was. */
    readonly task: Task<string> | undefined,
  ) {
    super(message);
  }
}

/** The longest wait the server grants one long-poll request, in seconds. */
export const MAX_LONG_POLL_SECONDS = 60;

/**
 * How long ask and waitTask wait for a final task when the caller gives no
 * time, in seconds: a person may take hours, so a caller that means to wait
 * that long says so (Infinity).
 */
export const DEFAULT_WAIT_SECONDS = 600;

const FINAL = new Set<string>(["completed", "expired"]);

/** Whether the task is completed or expired. */
export function isFinal(task: { status: string }): boolean {
  return FINAL.has(task.status);
}

/** The reason given with the deciding answer ("" when none). */
export function rationaleOf(task: Task<string>): string {
  if (task.final_verdict === null) return "";
  for (let i = task.attempts.length - 1; i >= 0; i--) {
    const a = task.attempts[i]!;
    if (!a.audit && a.verdict === task.final_verdict && a.tier === task.final_tier) return a.rationale;
  }
  return "";
}

/** The first of the environment variables that is set and not empty. */
function env(...names: string[]): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  for (const name of names) {
    const v = p?.env?.[name];
    if (v) return v;
  }
  return undefined;
}

/** A fresh idempotency key for a create the caller gave none. */
export function newIdempotencyKey(): string {
  return "arbiterhq-" + globalThis.crypto.randomUUID().replace(/-/g, "");
}

/** Seconds a Retry-After header asks for, or undefined. */
export function parseRetryAfter(v: string | null, now: number = Date.now()): number | undefined {
  if (!v) return undefined;
  const t = v.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const when = Date.parse(t);
  return Number.isNaN(when) ? undefined : Math.max((when - now) / 1000, 0);
}

/** 0.2 s doubling up to 12.8 s, with up to 20% jitter, in ms. */
function backoffMs(attempt: number): number {
  const d = 200 * 2 ** Math.min(attempt, 6);
  return d + Math.random() * (d / 5);
}

interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  idempotencyKey?: string;
  /** A POST the server stores once however often it is sent. */
  repeatable?: boolean;
  /** Extra time for a long-poll, in ms. */
  extraMs?: number;
  signal?: AbortSignal;
}

/**
 * How long to wait before sending a call again after err, in ms, or
 * undefined to give up: 429 after its Retry-After when that is at most the
 * longest wait; 5xx and lost connections on reads and on creates that carry
 * an idempotency key; 409 on those creates.
 */
export function retryWaitMs(
  method: string,
  repeatable: boolean,
  attempt: number,
  err: ArbiterError,
  maxRetries: number,
  maxRetryWaitMs: number,
): number | undefined {
  if (attempt >= maxRetries) return undefined;
  const safe = method === "GET" || repeatable;
  let retryable: boolean;
  if (err instanceof APIConnectionError) retryable = safe;
  else if (err.status === 429) retryable = true;
  else if (err.status >= 500) retryable = safe;
  else if (err.status === 409) retryable = repeatable;
  else retryable = false;
  if (!retryable) return undefined;
  const wait = err.retryAfter !== undefined ? err.retryAfter * 1000 : backoffMs(attempt);
  return wait > maxRetryWaitMs ? undefined : wait;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });
}

/** The fields of ask besides the prompt, verdicts and context. */
export type AskOptions = Omit<TaskCreate, "prompt" | "allowed_verdicts" | "context"> & {
  /** Seconds to wait for a final state: 600 unless given; Infinity waits until it is final. */
  wait?: number;
  idempotencyKey?: string;
  signal?: AbortSignal;
};

/** A client of the Arbiter API. */
export class Arbiter {
  private readonly apiKey: string;
  readonly baseURL: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly maxRetryWaitMs: number;
  private readonly fetch: typeof fetch;

  constructor(opts: ArbiterOptions = {}) {
    const key = opts.apiKey ?? env("SVC_API_KEY", "ARBITER_API_KEY");
    if (!key) throw new Error("no API key: pass apiKey or set SVC_API_KEY (or ARBITER_API_KEY)");
    this.apiKey = key;
    this.baseURL = (opts.baseURL ?? env("SVC_BASE_URL", "ARBITER_BASE_URL") ?? "http://localhost:8080").replace(/\/+$/, "");
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.maxRetries = opts.maxRetries ?? 3;
    this.maxRetryWaitMs = opts.maxRetryWaitMs ?? 60_000;
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  private async send<T>(call: Call): Promise<T> {
    const url = new URL(this.baseURL + call.path);
    for (const [k, v] of Object.entries(call.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.apiKey}`,
      Accept: "application/json",
    };
    if (call.body !== undefined) headers["Content-Type"] = "application/json";
    if (call.idempotencyKey !== undefined) headers["Idempotency-Key"] = call.idempotencyKey;
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    for (let attempt = 0; ; attempt++) {
      let err: ArbiterError;
      const timeout = AbortSignal.timeout(this.timeoutMs + (call.extraMs ?? 0));
      const signal = call.signal ? anySignal([call.signal, timeout]) : timeout;
      try {
        const res = await this.fetch(url, { method: call.method, headers, body, signal });
        const text = await res.text();
        let parsed: unknown;
        try {
          parsed = text === "" ? undefined : JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        if (res.status === 200 && parsed !== undefined) return parsed as T;
        if (res.status === 204 && call.method === "DELETE") return undefined as T;
        err = errorFor(res.status, parsed, {
          requestId: res.headers.get("X-Request-Id") ?? undefined,
          retryAfter: parseRetryAfter(res.headers.get("Retry-After")),
        });
      } catch (e) {
        if (call.signal?.aborted) throw e;
        if (e instanceof ArbiterError) throw e;
        err = new APIConnectionError(`${call.method} ${call.path}: no answer from the server (${(e as Error).name})`);
      }
      const wait = retryWaitMs(call.method, call.repeatable ?? false, attempt, err, this.maxRetries, this.maxRetryWaitMs);
      if (wait === undefined) throw err;
      await sleep(wait, call.signal);
    }
  }

  /**
   * Creates a task. With idempotencyKey, a repeat returns the task that key
   * made. `V` narrows the verdicts of the task it answers.
   */
  async createTask<V extends string = string>(input: TaskCreate, opts: { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<Task<V>> {
    return this.send<Task<V>>({
      method: "POST", path: "/v1/tasks", body: input,
      idempotencyKey: opts.idempotencyKey ?? newIdempotencyKey(), repeatable: true, signal: opts.signal,
    });
  }

  /** Creates up to 100 tasks; one result per item, in order. Items without a key get one. */
  async createTasks(items: TaskBatchItem[], opts: { signal?: AbortSignal } = {}): Promise<TaskResult[]> {
    const tasks = items.map((t) => ({ ...t, idempotency_key: t.idempotency_key ?? newIdempotencyKey() }));
    const data = await this.send<{ results: Array<Record<string, unknown>> }>({
      method: "POST", path: "/v1/tasks/batch", body: { tasks }, repeatable: true, signal: opts.signal,
    });
    return data.results.map((r): TaskResult => {
      const status = Number(r.status);
      if (status === 200 && r.task) return { ok: true, status: 200, task: r.task as Task, replayed: Boolean(r.replayed) };
      return { ok: false, status, error: errorFor(status, r) };
    });
  }

  /**
   * Reads a task; with wait (0–60 s) the server answers as soon as it is
   * final. `V` names the task's verdicts when the caller knows them.
   */
  async getTask<V extends string = string>(id: string, opts: { wait?: number; signal?: AbortSignal } = {}): Promise<Task<V>> {
    if (!id || /[/?#]/.test(id)) throw new Error(`not a task id: ${JSON.stringify(id)}`);
    const wait = opts.wait && opts.wait > 0 ? Math.min(Math.floor(opts.wait), MAX_LONG_POLL_SECONDS) : undefined;
    return this.send<Task<V>>({
      method: "GET", path: `/v1/tasks/${id}`, query: { wait }, extraMs: (wait ?? 0) * 1000, signal: opts.signal,
    });
  }

  /**
   * Waits until the task is completed or expired, long-polling. Past
   * timeoutMs (10 minutes unless given; Infinity: as long as it takes,
   * which for a person may be days), WaitTimeout carries the task as last
   * read; the wait is never cut short.
   */
  async waitTask<V extends string = string>(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Task<V>> {
    const timeoutMs = opts.timeoutMs ?? DEFAULT_WAIT_SECONDS * 1000;
    if (!(timeoutMs >= 0)) throw new Error("a wait's timeoutMs must be 0 or more");
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const remaining = Math.max(0, deadline - Date.now());
      const wait = Math.min(MAX_LONG_POLL_SECONDS, Math.ceil(remaining / 1000));
      const last = await this.getTask<V>(id, { wait, signal: opts.signal });
      if (isFinal(last)) return last;
      if (Date.now() >= deadline) throw waitTimeout(id, last);
    }
  }

  /**
   * The account's tasks that match the filters, newest first: `await` it
   * for the first page (`tasks`, `has_more`, `starting_after`,
   * `nextPage()`), or `for await` over it for every task, page after page.
   */
  listTasks(filters: ListFilters = {}, opts: { signal?: AbortSignal } = {}): TaskPager {
    const fetchPage = async (startingAfter: string | undefined): Promise<TaskPage> => {
      const data = await this.send<{ tasks: Task[]; has_more: boolean }>({
        method: "GET", path: "/v1/tasks", query: { ...filters, starting_after: startingAfter ?? filters.starting_after },
        signal: opts.signal,
      });
      const hasMore = data.has_more && data.tasks.length > 0;
      const cursor = hasMore ? data.tasks[data.tasks.length - 1]!.id : undefined;
      const page: TaskPage = {
        tasks: data.tasks,
        has_more: hasMore,
        starting_after: cursor,
        nextPage: async () => (cursor === undefined ? undefined : fetchPage(cursor)),
        async *[Symbol.asyncIterator]() {
          for (let p: TaskPage | undefined = page; p !== undefined; p = await p.nextPage()) yield* p.tasks;
        },
      };
      return page;
    };
    return {
      then: (onFulfilled, onRejected) => fetchPage(undefined).then(onFulfilled, onRejected),
      async *[Symbol.asyncIterator]() {
        yield* await fetchPage(undefined);
      },
    };
  }

  /** The account's policies, by task type. */
  async listPolicies(opts: { signal?: AbortSignal } = {}): Promise<Policy[]> {
    const data = await this.send<{ policies: Policy[] }>({ method: "GET", path: "/v1/policies", signal: opts.signal });
    return data.policies;
  }

  /** The account's policy of the task type ("default" for the default policy); NotFound without one. */
  async getPolicy(taskType: string, opts: { signal?: AbortSignal } = {}): Promise<Policy> {
    return this.send<Policy>({ method: "GET", path: policyPath(taskType), signal: opts.signal });
  }

  /** Replaces the account's policy of the task type; tasks already created keep their values. */
  async putPolicy(taskType: string, policy: PolicyPut, opts: { signal?: AbortSignal } = {}): Promise<Policy> {
    return this.send<Policy>({ method: "PUT", path: policyPath(taskType), body: policy, repeatable: true, signal: opts.signal });
  }

  /** Deletes the account's policy of the task type; NotFound without one. */
  async deletePolicy(taskType: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.send<void>({ method: "DELETE", path: policyPath(taskType), signal: opts.signal });
  }

  /**
   * Creates the task (with an idempotency key) and waits for it to be final,
   * up to `wait` seconds (10 minutes unless given; Infinity: as long as it
   * takes). The verdicts narrow the answer's type: `ask("Refund?",
   * ["approve", "reject"])` resolves to a `Task<"approve" | "reject">`.
   */
  async ask<const V extends string>(prompt: string, allowedVerdicts: readonly V[], context?: unknown, opts: AskOptions = {}): Promise<Task<V>> {
    const { wait, idempotencyKey, signal, ...fields } = opts;
    const input: TaskCreate = { prompt, allowed_verdicts: [...allowedVerdicts], ...fields };
    if (context !== undefined) input.context = context;
    const task = await this.createTask<V>(input, { idempotencyKey, signal });
    if (isFinal(task)) return task;
    return this.waitTask<V>(task.id, { timeoutMs: (wait ?? DEFAULT_WAIT_SECONDS) * 1000, signal });
  }
}

function policyPath(taskType: string): string {
  if (!taskType) throw new Error("a policy needs a task type");
  return `/v1/policies/${encodeURIComponent(taskType)}`;
}

function waitTimeout(id: string, last: Task<string> | undefined): WaitTimeout {
  return new WaitTimeout(`task ${id} is not final yet (${last ? `still ${last.status}` : "never read"})`, last);
}

function anySignal(signals: AbortSignal[]): AbortSignal {
  const c = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      c.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}
