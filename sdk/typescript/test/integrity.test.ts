/** Approval integrity offline: the shared RFC 8785 and digest vectors
 * (testdata/jcs) and the receipt vectors (testdata/receipts), checked
 * here as Go and Python check them, and what approvedAction refuses. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import {
  ActionDigestMismatch, ActionNotApproved, ReceiptInvalid, actionDigest, approvedAction, canonicalJSON, verifyReceipt, type JWKS, type Task,
} from "../src/index.js";

const testdata = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../../../testdata");
const read = (path: string) => readFileSync(resolve(testdata, path), "utf8");

describe("canonicalJSON", () => {
  it("writes the RFC's and the shared vectors", () => {
    const v = JSON.parse(read("jcs/vectors.json")) as { canonical: { name: string; input: string; canonical: string }[] };
    assert.ok(v.canonical.length > 0);
    for (const c of v.canonical) assert.equal(canonicalJSON(JSON.parse(c.input)), c.canonical, c.name);
  });
  it("writes numbers as ECMAScript does", () => {
    const lines = read("jcs/numbers.txt").trim().split("\n");
    assert.ok(lines.length >= 5000);
    const view = new DataView(new ArrayBuffer(8));
    for (const line of lines) {
      const [bits, want] = line.split(",");
      view.setBigUint64(0, BigInt("0x" + bits));
      assert.equal(canonicalJSON(view.getFloat64(0)), want, bits);
    }
  });
  it("refuses what has no canonical form", () => {
    for (const v of [NaN, Infinity, "\ud800"]) assert.throws(() => canonicalJSON({ a: v }), TypeError);
  });
});

describe("actionDigest", () => {
  it("gives the shared digests", async () => {
    const v = JSON.parse(read("jcs/digests.json")) as { name: string; args_text: string; canonical_args: string; digest: string }[];
    assert.ok(v.length > 0);
    for (const d of v) {
      assert.equal(canonicalJSON(JSON.parse(d.args_text)), d.canonical_args, d.name);
      assert.equal(await actionDigest(d.name, JSON.parse(d.args_text)), d.digest, d.name);
    }
  });
});

describe("approvedAction", () => {
  const task = async (args: Record<string, unknown>, verdict = "approve", status = "completed"): Promise<Task> => ({
    id: "tsk_0123456789abcdef", status, task_type: "t", source: "", touchpoint: "t", prompt: "p", allowed_verdicts: ["approve", "reject"],
    confidence_threshold: 0.8, final_verdict: status === "completed" ? verdict : null, final_tier: "human", final_confidence: 1,
    created_at: 1, completed_at: 2, deadline_at: null, expired_at: null, attempts: [],
    approved_action: { name: "issue_refund", args, digest: await actionDigest("issue_refund", { amount: 80 }), edited: true,
      proposed_digest: await actionDigest("issue_refund", { amount: 120 }) },
  } as Task);
  it("checks the digest and the verdict", async () => {
    assert.deepEqual((await approvedAction(await task({ amount: 80 }), "approve")).args, { amount: 80 });
    await assert.rejects(approvedAction(await task({ amount: 800 })), ActionDigestMismatch);
    await assert.rejects(approvedAction(await task({ amount: 80 }, "reject"), "approve"), ActionNotApproved);
    await assert.rejects(approvedAction(await task({ amount: 80 }, "approve", "human_needed")), ActionNotApproved);
  });
});

describe("verifyReceipt", () => {
  it("verifies the receipt vectors with WebCrypto's Ed25519", async () => {
    const v = JSON.parse(read("receipts/vectors.json")) as {
      jwks: JWKS; receipts: { receipt: string; hash: string; claims: Record<string, unknown> }[]; invalid: { why: string; receipt: string }[];
    };
    let prev: string | null = null;
    for (const r of v.receipts) {
      const claims = await verifyReceipt(r.receipt, v.jwks);
      assert.deepEqual(claims, r.claims);
      assert.equal(claims.prev, prev);
      prev = r.hash;
    }
    assert.ok(v.invalid.length >= 4);
    for (const bad of v.invalid) await assert.rejects(verifyReceipt(bad.receipt, v.jwks), ReceiptInvalid, bad.why);
  });
});
