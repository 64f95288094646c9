/**
 * `arbiter gateway` between the MCP TypeScript SDK's own client (1.32) and
 * npm's @modelcontextprotocol/server-everything (pinned in this package's
 * lockfile), each a process of its own, against the file's real `arbiter
 * serve`. The policy holds every get-sum; a person decides its task on the
 * desk. The upstream's stdin is copied to a file on its way in, so the test
 * counts the tools/call requests the upstream really got.
 */

import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { Reviewer, serverForTests, waitFor } from "./harness.js";

let reviewer: Reviewer;
let key = "";
const { server } = serverForTests((s) => ({ reviewer, key } = s));

// dist/test/gateway.test.js → the package's own node_modules.
const everything = fileURLToPath(new URL("../../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url));

const POLICY = `rules:
  - tool: echo
    allow: true
  - tool: get-sum
    ask:
      task_type: sum
`;

type Task = { id: string; status: string; action?: { name: string; args: unknown; digest: string } };

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(server.baseURL + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function gatewayTasks(): Promise<Task[]> {
  const { status, json } = await api("GET", "/v1/tasks?source=arbiter-gateway&limit=100");
  assert.equal(status, 200);
  return json.tasks as Task[];
}

/** A gateway in front of server-everything, the agent connected to it. */
async function connect(name: string): Promise<{ agent: Client; upstreamCalls: (tool: string) => number }> {
  const dir = join(server.dir, name);
  const policy = `${dir}.policy.yaml`;
  const seen = `${dir}.upstream-in.jsonl`;
  writeFileSync(policy, POLICY);
  const upstream = `sh -c 'tee -a "${seen}" | "${process.execPath}" "${everything}" stdio'`;
  const agent = new Client({ name: "ts-agent", version: "0.0.1" });
  await agent.connect(new StdioClientTransport({
    command: process.env.ARBITER_BIN ?? `${server.dir}/arbiter`,
    args: ["gateway", "--upstream-cmd", upstream, "--policy", policy, "--state", `${dir}.state.json`],
    env: { ...(process.env as Record<string, string>), SVC_API_KEY: key, SVC_BASE_URL: server.baseURL },
    stderr: "ignore",
  }));
  const upstreamCalls = (tool: string): number => {
    if (!existsSync(seen)) return 0;
    return readFileSync(seen, "utf8").split("\n").filter((line) => {
      if (!line.trim()) return false;
      const msg = JSON.parse(line) as { method?: string; params?: { name?: string } };
      return msg.method === "tools/call" && msg.params?.name === tool;
    }).length;
  };
  return { agent, upstreamCalls };
}

type Result = { content: { type: string; text?: string }[]; isError?: boolean };

const textOf = (r: Result): string => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

/** Calls get-sum through the gateway and decides its task on the desk once it waits. */
async function heldSum(name: string, verdict: string, rationale: string, seen: Set<string>) {
  const { agent, upstreamCalls } = await connect(name);
  const tools = (await agent.listTools()).tools.map((t) => t.name);
  assert.ok(tools.includes("get-sum") && tools.includes("echo"), `tools: ${tools.join(", ")}`);
  const echoed = (await agent.callTool({ name: "echo", arguments: { message: "passes through" } })) as Result;
  assert.equal(textOf(echoed), "Echo: passes through");
  const call = agent.callTool({ name: "get-sum", arguments: { a: 2, b: 3 } }, undefined, { timeout: 120_000 }) as Promise<Result>;
  const task = await waitFor(async () => (await gatewayTasks()).find((t) => !seen.has(t.id) && t.status === "human_needed"), "the held call's task");
  seen.add(task.id);
  assert.deepEqual(task.action?.args, { a: 2, b: 3 });
  assert.equal(upstreamCalls("get-sum"), 0, "the upstream got a held call before its decision");
  await reviewer.decide(task.id, verdict, rationale);
  const result = await call;
  return { agent, task, result, upstreamCalls };
}

describe("arbiter gateway with the MCP TypeScript SDK and server-everything", () => {
  const seen = new Set<string>();

  it("answers an approved call with the upstream's result, run once", async () => {
    const { agent, task, result, upstreamCalls } = await heldSum("approved", "approve", "Fine.", seen);
    try {
      assert.ok(!result.isError, textOf(result));
      assert.equal(textOf(result), "The sum of 2 and 3 is 5.");
      assert.equal(upstreamCalls("get-sum"), 1);
      // Arbiter holds the one claim: another is refused.
      const { json } = await api("GET", `/v1/tasks/${task.id}`);
      const approved = json.approved_action as { digest: string };
      const again = await api("POST", `/v1/tasks/${task.id}/execution`, { digest: approved.digest, claim_id: "another" });
      assert.equal(again.status, 409);
      assert.equal(again.json.code, "already_executed");
    } finally {
      await agent.close();
    }
  });

  it("answers a rejected call with the refusal, and the upstream never gets it", async () => {
    const { agent, result, upstreamCalls } = await heldSum("rejected", "reject", "Sums are not for agents today.", seen);
    try {
      assert.ok(result.isError);
      assert.match(textOf(result), /Sums are not for agents today\./);
      assert.match(textOf(result), /not made/);
      assert.equal(upstreamCalls("get-sum"), 0);
    } finally {
      await agent.close();
    }
  });
});
