/** Standard Webhooks verification of the messages Arbiter sends. */

import { ArbiterError } from "./errors.js";
import type { webhooks } from "./wire.js";

/** The body of the webhook event named K, as the API's document gives it. */
export type WebhookEventOf<K extends keyof webhooks> = NonNullable<
  webhooks[K]["post"]["requestBody"]
>["content"]["application/json"];

/**
 * A webhook event as verifyWebhook returns it: one of the document's
 * events, told apart by `type` (a task event's `data` is the Task). A later
 * server may send types this version does not know: give a `switch` on
 * `type` a default.
 */
export type WebhookEvent = { [K in keyof webhooks]: WebhookEventOf<K> }[keyof webhooks];

/** A message is not one Arbiter signed with this secret, or is too old or too new. */
export class WebhookVerificationError extends ArbiterError {}

/** How far a message's timestamp may be from now, either way, in seconds. */
export const DEFAULT_TOLERANCE_SECONDS = 5 * 60;

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string {
  let v: string | string[] | undefined | null;
  if (typeof (headers as Headers).get === "function") {
    v = (headers as Headers).get(name);
  } else {
    for (const [k, val] of Object.entries(headers)) if (k.toLowerCase() === name) v = val;
  }
  if (Array.isArray(v)) v = v.join(" ");
  if (v === undefined || v === null || v === "") throw new WebhookVerificationError(`the ${name} header is missing`);
  return v;
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toBase64(b: Uint8Array): string {
  let s = "";
  for (const c of b) s += String.fromCharCode(c);
  return btoa(s);
}

/** Compares two strings in time that depends only on their lengths. */
function equal(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

async function subtle(): Promise<SubtleCrypto> {
  if (globalThis.crypto?.subtle) return globalThis.crypto.subtle;
  const nodeCrypto = await import("node:crypto");
  return nodeCrypto.webcrypto.subtle as SubtleCrypto;
}

/** Options of verifyWebhook. */
export interface VerifyOptions {
  /** Seconds a timestamp may be from now (default 300). */
  toleranceSeconds?: number;
  /** Now, in Unix seconds (default the clock). */
  now?: number;
}

/**
 * Checks a webhook message and returns its event. `body` is the
 * raw body exactly as received, `headers` the request's headers (a Headers
 * or a plain object, any case), `secret` the endpoint's (or the callback)
 * signing secret, `whsec_…`. Any one of several signatures may match (both
 * secrets sign for a day after a rotation); each is compared in constant
 * time; a timestamp more than the tolerance from now is refused.
 */
export async function verifyWebhook(
  body: string | Uint8Array,
  headers: HeaderBag,
  secret: string,
  opts: VerifyOptions = {},
): Promise<WebhookEvent> {
  const raw = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!/^\d+$/.test(ts)) throw new WebhookVerificationError("the webhook-timestamp header is not a whole number");
  const now = opts.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(ts)) > (opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError("the message's timestamp is outside the tolerance");
  }
  const s = await subtle();
  const keyBytes = fromBase64(secret.startsWith("whsec_") ? secret.slice(6) : secret);
  const key = await s.importKey("raw", keyBytes as BufferSource, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const prefix = new TextEncoder().encode(`${id}.${ts}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const expected = toBase64(new Uint8Array(await s.sign("HMAC", key, signed as BufferSource)));
  let matched = false;
  for (const sig of signatures.split(" ")) {
    const [version, value] = sig.split(",", 2);
    if (version === "v1" && value !== undefined && equal(expected, value)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError("no signature matches the message");
  let event: unknown;
  try {
    event = JSON.parse(new TextDecoder().decode(raw));
  } catch {
    throw new WebhookVerificationError("the message's body is not JSON");
  }
  const e = event as { type?: unknown; timestamp?: unknown; data?: unknown } | null;
  if (e === null || typeof e !== "object" || typeof e.type !== "string" || typeof e.timestamp !== "string" || !("data" in e)) {
    throw new WebhookVerificationError("the message's body is not an event: it needs type, timestamp and data");
  }
  return e as WebhookEvent;
}
