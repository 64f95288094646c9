/**
 * MCP Tasks with the MCP TypeScript SDK's own client (1.32): ask_verdict
 * as a task on both transports (Streamable HTTP at /v1/mcp, and `arbiter
 * mcp` on stdio), polled to completed after a person decides and to
 * failed on expiry. The store is the harness's: SQLite, or Postgres when
 * ARBITER_TEST_DATABASE_URL is set (CI).
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

import { Arbiter } from "../src/index.js";
import { Reviewer, serverForTests, waitFor } from "./harness.js";

let arbiter: Arbiter;
let reviewer: Reviewer;
let key = "";
const { server } = serverForTests((s) => ({ arbiter, reviewer, key } = s));

const transports: Record<string, () => Transport> = {
  http: () => new StreamableHTTPClientTransport(new URL(server.baseURL + "/v1/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  }),
  stdio: () => new StdioClientTransport({
    command: process.env.ARBITER_BIN ?? `${server.dir}/arbiter`,
    args: ["mcp"],
    env: { ...(process.env as Record<string, string>), SVC_API_KEY: key, SVC_BASE_URL: server.baseURL },
    stderr: "ignore",
  }),
};

async function connect(name: string): Promise<Client> {
  const client = new Client({ name: "arbiter-test", version: "0.0.1" });
  await client.connect(transports[name]!());
  return client;
}

type Message = { type: string; task?: { taskId: string; status: string }; result?: { structuredContent?: Record<string, unknown>; isError?: boolean }; error?: Error };

/** Runs ask_verdict as a task, collecting every message of the stream. */
async function askAsTask(client: Client, prompt: string, extra: Record<string, unknown> = {}): Promise<{ taskId: Promise<string>; done: Promise<Message[]> }> {
  let created!: (id: string) => void;
  const taskId = new Promise<string>((r) => (created = r));
  const done = (async () => {
    const messages: Message[] = [];
    const stream = client.experimental.tasks.callToolStream(
      { name: "ask_verdict", arguments: { prompt, allowed_verdicts: ["approve", "reject"], context: { order: "ord_1" }, ...extra } },
      undefined,
      { task: { ttl: 60_000 } },
    );
    for await (const m of stream as AsyncIterable<Message>) {
      messages.push(m);
      if (m.type === "taskCreated") created(m.task!.taskId);
    }
    return messages;
  })();
  return { taskId, done };
}

for (const name of Object.keys(transports)) {
  describe(`MCP Tasks over ${name}`, () => {
    it("hands back a task at once and polls it to completed after a person decides", async () => {
      const client = await connect(name);
      try {
        assert.ok(client.getServerCapabilities()?.tasks?.requests?.tools?.call, "the server offers no tasks for tools/call");
        const { taskId, done } = await askAsTask(client, `Refund ${name} order ${randomBytes(3).toString("hex")}?`);
        const id = await taskId;
        assert.match(id, /^tsk_[0-9a-f]{16}$/);
        await waitFor(async () => (await arbiter.getTask(id)).status === "human_needed", "the task to reach a person");
        const working = await client.experimental.tasks.getTask(id);
        assert.equal(working.status, "working");
        await reviewer.decide(id, "approve", "Within policy.");
        const messages = await done;
        assert.equal(messages[0]?.type, "taskCreated");
        assert.ok(messages.some((m) => m.type === "taskStatus" && m.task?.status === "working"));
        const last = messages.at(-1)!;
        assert.equal(last.type, "result", JSON.stringify(last));
        const answer = last.result!.structuredContent!;
        assert.equal(answer.task_id, id);
        assert.equal(answer.verdict, "approve");
        assert.equal(answer.tier, "human");
        assert.equal(answer.rationale, "Within policy.");
        const listed = await client.experimental.tasks.listTasks();
        assert.ok(listed.tasks.some((t) => t.taskId === id && t.status === "completed"));
        await assert.rejects(client.experimental.tasks.cancelTask(id), /nothing to cancel/);
      } finally {
        await client.close();
      }
    });
  });
}

describe("MCP Tasks on expiry", () => {
  it("polls to failed on both transports once the deadline passes", async () => {
    // The shortest deadline is 60 s: both tasks wait it out together.
    const runs = await Promise.all(Object.keys(transports).map(async (name) => {
      const client = await connect(name);
      const { taskId, done } = await askAsTask(client, `Expire ${name} ${randomBytes(3).toString("hex")}?`, { deadline_seconds: 60 });
      return { name, client, id: await taskId, done };
    }));
    try {
      for (const r of runs) {
        const messages = await r.done;
        const last = messages.at(-1)!;
        assert.equal(last.type, "error", `${r.name}: ${JSON.stringify(last)}`);
        assert.match(String(last.error), /failed/);
        assert.equal((await r.client.experimental.tasks.getTask(r.id)).status, "failed");
        assert.equal((await arbiter.getTask(r.id)).status, "expired");
      }
    } finally {
      await Promise.all(runs.map((r) => r.client.close()));
    }
  });
});
