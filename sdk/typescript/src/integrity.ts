/**
 * Approval integrity: run exactly the action a task approved, and check a
 * decision's receipt offline.
 *
 * `approvedAction(task, "approve")` returns the action the task's final
 * decision approved (a reviewer may have edited its arguments) after
 * recomputing its digest, the SHA-256 of the RFC 8785 (JCS) form of
 * `{"args": ..., "name": ...}`: arguments changed after the approval are
 * refused with ActionDigestMismatch. `verifyReceipt(receipt, jwks)` checks
 * a receipt's Ed25519 signature (WebCrypto) against the server's keys
 * (`/.well-known/arbiter/jwks.json`) and returns its claims.
 */

import type { components } from "./wire.js";
import type { Arbiter, Task, TaskCreate } from "./client.js";
import { IdempotencyMismatch } from "./errors.js";

/** The action a final decision approved: execute exactly name(args). */
export type ApprovedAction = components["schemas"]["ApprovedAction"];
/** The public keys that sign receipts. */
export type JWKS = components["schemas"]["JWKS"];

/** The "typ" of a receipt's JWS header. */
export const RECEIPT_TYPE = "arbiter-receipt+jws";

/** An action that must not run: the base of the errors below. */
export class ActionIntegrityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
/** The task approved no action: not completed, no action, or a verdict that does not approve. */
export class ActionNotApproved extends ActionIntegrityError {}
/** The action's name and arguments are not the ones the digest names: they changed after the approval. */
export class ActionDigestMismatch extends ActionIntegrityError {}
/** A receipt that does not verify. */
export class ReceiptInvalid extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

// loneSurrogate matches a UTF-16 surrogate without its pair.
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The RFC 8785 form of a JSON value: members sorted by their names' UTF-16
 * code units (JavaScript's own string order), no whitespace, strings and
 * numbers as JSON.stringify writes them. Throws for what has no such form
 * (NaN, infinities, lone surrogates).
 */
export function canonicalJSON(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      if (loneSurrogate.test(value)) throw new TypeError("a string holds a lone surrogate");
      return JSON.stringify(value);
    case "number":
      // A number is a double already: JSON.stringify writes it as RFC
      // 8785 asks (the server refuses integers a double would round).
      if (!Number.isFinite(value)) throw new TypeError("NaN and infinities have no JSON form");
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) return "[" + value.map(canonicalJSON).join(",") + "]";
      const obj = value as Record<string, unknown>;
      return "{" + Object.keys(obj).sort().map((k) => {
        if (loneSurrogate.test(k)) throw new TypeError("a member name holds a lone surrogate");
        return JSON.stringify(k) + ":" + canonicalJSON(obj[k]);
      }).join(",") + "}";
    }
  }
  throw new TypeError(`a ${typeof value} is not a JSON value`);
}

/** WebCrypto's subtle: the global one (browsers, Node 19+), else Node's. */
async function subtle(): Promise<SubtleCrypto> {
  if (globalThis.crypto?.subtle) return globalThis.crypto.subtle;
  const { webcrypto } = await import("node:crypto");
  return webcrypto.subtle as unknown as SubtleCrypto;
}

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The digest the server gives the action name(args): "sha256:" and the hex SHA-256 of the RFC 8785 form of {"args", "name"}. */
export async function actionDigest(name: string, args: unknown): Promise<string> {
  const text = canonicalJSON({ args, name });
  return "sha256:" + hex(await (await subtle()).digest("SHA-256", new TextEncoder().encode(text)));
}

/**
 * The action the task's final decision approved, checked: its digest
 * recomputed from its name and arguments must be its own. `approving`
 * names the verdicts that approve (none: any final verdict). Throws
 * ActionNotApproved when the task is not completed with one of them or
 * approved no action, and ActionDigestMismatch when the digest does not
 * match: then nothing must run.
 */
export async function approvedAction(task: Task, ...approving: string[]): Promise<ApprovedAction> {
  const a = task.approved_action;
  if (task.status !== "completed" || !a || task.final_verdict === null) {
    throw new ActionNotApproved(`task ${task.id} approved no action (${task.status})`);
  }
  if (approving.length > 0 && !approving.includes(task.final_verdict)) {
    throw new ActionNotApproved(`task ${task.id} was decided "${task.final_verdict}", which does not approve`);
  }
  let digest: string;
  try {
    digest = await actionDigest(a.name, a.args);
  } catch (e) {
    throw new ActionDigestMismatch(`the approved action of ${task.id} has no canonical form: ${(e as Error).message}`);
  }
  if (digest !== a.digest) throw new ActionDigestMismatch(`the approved action of ${task.id} is not the one its digest names`);
  return a;
}

/**
 * The action to run for a call name(args) the task was asked about: the
 * call must be the task's proposed action (its digest the proposal's), and
 * the approved action, with a reviewer's edits, is what runs. Throws
 * ActionDigestMismatch for a call that is not the one asked about (its
 * arguments changed since), and ActionNotApproved as approvedAction does.
 */
export async function checkCall(task: Task, name: string, args: unknown, ...approving: string[]): Promise<ApprovedAction> {
  const approved = await approvedAction(task, ...approving);
  const proposed = task.action?.digest ?? approved.proposed_digest;
  let digest: string;
  try {
    digest = await actionDigest(name, args);
  } catch (e) {
    throw new ActionDigestMismatch(`the call of ${name} has no canonical form: ${(e as Error).message}`);
  }
  if (digest !== proposed) throw new ActionDigestMismatch(`the call of ${name} is not the one task ${task.id} asked about: its arguments changed`);
  return approved;
}

/** How an adapter puts a tool call to Arbiter as the task's action. */
export interface CallAction {
  /** Per tool, the arguments a reviewer may change before approving. */
  editable: Record<string, string[]>;
  /** Per tool, the JSON Schema its arguments (and every edit) satisfy. */
  schemas: Record<string, Record<string, unknown>>;
}

/**
 * Creates (or, by its idempotency key, finds again) the task about the tool
 * call toolName(args), carrying the call as its action. The key names one
 * call: the same key with other arguments is a call changed since it was
 * asked about, an ActionDigestMismatch (nothing must run).
 */
export async function askAboutCall(arbiter: Arbiter, o: CallAction, toolName: string, args: unknown,
  body: Omit<TaskCreate, "action">, idempotencyKey: string): Promise<Task> {
  const action: NonNullable<TaskCreate["action"]> = { name: toolName, args: args as Record<string, unknown> };
  if (o.editable[toolName]?.length) action.editable = o.editable[toolName];
  if (o.schemas[toolName]) action.schema = o.schemas[toolName];
  try {
    return await arbiter.createTask({ ...body, action }, { idempotencyKey });
  } catch (e) {
    if (e instanceof IdempotencyMismatch) {
      throw new ActionDigestMismatch(`the call of ${toolName} is not the one Arbiter was asked about: its arguments changed`);
    }
    throw e;
  }
}

/** What a receipt signs. */
export interface ReceiptClaims {
  task_id: string;
  account: string;
  verdict: string;
  tier: string;
  decided_by: string;
  action_digest: string | null;
  decided_at: number;
  seq: number;
  prev: string | null;
}

const claimNames = ["task_id", "account", "verdict", "tier", "decided_by", "action_digest", "decided_at", "seq", "prev"];

function fromB64(s: string): Uint8Array<ArrayBuffer> {
  const b = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (s.length % 4)) % 4));
  const out = new Uint8Array(new ArrayBuffer(b.length));
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
  return out;
}

/**
 * Checks a receipt against the keys (the JWKS served at
 * `/.well-known/arbiter/jwks.json`) with WebCrypto's Ed25519, and returns
 * its claims. Throws ReceiptInvalid for a receipt that does not verify.
 */
export async function verifyReceipt(receipt: string, jwks: JWKS): Promise<ReceiptClaims> {
  const [head, body, sig, ...rest] = receipt.split(".");
  if (head === undefined || body === undefined || sig === undefined || rest.length > 0) {
    throw new ReceiptInvalid("a receipt is three base64url parts separated by dots");
  }
  let header: { alg?: string; kid?: string; typ?: string };
  let payload: Record<string, unknown>;
  let signature: Uint8Array<ArrayBuffer>;
  try {
    header = JSON.parse(new TextDecoder().decode(fromB64(head)));
    payload = JSON.parse(new TextDecoder().decode(fromB64(body)));
    signature = fromB64(sig);
  } catch {
    throw new ReceiptInvalid("a receipt's parts are base64url JSON");
  }
  if (header.alg !== "EdDSA" || header.typ !== RECEIPT_TYPE) {
    throw new ReceiptInvalid(`the header is not a receipt's (alg EdDSA, typ ${RECEIPT_TYPE})`);
  }
  const jwk = jwks.keys.find((k) => k.kid === header.kid && k.kty === "OKP" && k.crv === "Ed25519");
  if (!jwk) throw new ReceiptInvalid(`no key has the id ${header.kid}`);
  const s = await subtle();
  let ok = false;
  try {
    const key = await s.importKey("jwk", { kty: "OKP", crv: "Ed25519", x: jwk.x }, { name: "Ed25519" }, false, ["verify"]);
    ok = await s.verify({ name: "Ed25519" }, key, signature, new TextEncoder().encode(`${head}.${body}`));
  } catch {
    ok = false;
  }
  if (!ok) throw new ReceiptInvalid("the signature does not match");
  const names = Object.keys(payload).sort();
  if (names.join(",") !== [...claimNames].sort().join(",") || typeof payload.task_id !== "string" || typeof payload.seq !== "number") {
    throw new ReceiptInvalid("the payload is not a receipt's claims");
  }
  return payload as unknown as ReceiptClaims;
}
