/**
 * The TypeScript SDK's overhead on a create-and-wait, against raw fetch:
 * the same create (with an idempotency key) and long-poll until final, N
 * times each way, alternating, against a real `arbiter serve` (the test
 * harness: SQLite, the rules backend deciding these tasks at once).
 * Prints medians, 90th percentiles and the median difference, against its
 * target (< 1 ms): ok or MISSED, as `make bench` prints its phases.
 */

import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";

import { Arbiter } from "../src/index.js";
import { Server } from "../test/harness.js";

const N = Number(process.argv[2] ?? 300);
const body = { prompt: "Approve this refund?", allowed_verdicts: ["approve", "reject"], context: { auto: "approve" } };

async function raw(base: string, key: string): Promise<void> {
  const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json", "Idempotency-Key": "raw-" + randomUUID() };
  let task = (await (await fetch(base + "/v1/tasks", { method: "POST", headers, body: JSON.stringify(body) })).json()) as { id: string; status: string };
  while (task.status !== "completed" && task.status !== "expired") {
    task = (await (await fetch(`${base}/v1/tasks/${task.id}?wait=60`, { headers })).json()) as { id: string; status: string };
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;

const server = new Server();
await server.start();
try {
  const key = server.newAccount("bench@example.com");
  execFileSync(process.env.ARBITER_BIN!, ["admin", "set-cap", "--email", "bench@example.com", "--cap", String(10 * N + 100)], {
    env: { ...process.env, ARBITER_DATABASE_URL: "sqlite:" + server.dir + "/arbiter.db" },
  });
  const sdk = new Arbiter({ apiKey: key, baseURL: server.baseURL });
  const rawMs: number[] = [];
  const sdkMs: number[] = [];
  for (let i = 0; i < 20; i++) {
    await raw(server.baseURL, key);
    await sdk.ask(body.prompt, body.allowed_verdicts, body.context);
  }
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await raw(server.baseURL, key);
    const t1 = performance.now();
    await sdk.ask(body.prompt, body.allowed_verdicts, body.context);
    const t2 = performance.now();
    rawMs.push(t1 - t0);
    sdkMs.push(t2 - t1);
  }
  const diffs = sdkMs.map((s, i) => s - rawMs[i]!);
  console.log(`typescript create-and-wait, ${N} each: raw fetch median ${median(rawMs).toFixed(2)} ms (p90 ${p90(rawMs).toFixed(2)}), ` +
    `@arbiterhq/sdk median ${median(sdkMs).toFixed(2)} ms (p90 ${p90(sdkMs).toFixed(2)}), overhead median ${median(diffs) >= 0 ? "+" : ""}${median(diffs).toFixed(3)} ms ` +
    `(target < 1 ms) ${median(diffs) < 1 ? "ok" : "MISSED"}`);
} finally {
  await server.stop();
}
