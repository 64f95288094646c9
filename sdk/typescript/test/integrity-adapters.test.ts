/**
 * The adapters run only what was approved, against the frameworks' real
 * packages and a real server: a person edits the amount on the desk and the
 * tool runs with the edited amount; arguments changed after the approval
 * are refused with ActionDigestMismatch, and the tool does not run.
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import { Agent, Usage, run, setTracingDisabled, tool as agentTool, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { generateText, tool as aiTool, type ModelMessage } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";

import { ActionDigestMismatch, Arbiter, approvedAction, verifyReceipt, type JWKS, type Task } from "../src/index.js";
import { ArbiterToolApproval } from "../src/ai.js";
import { LangGraphBridge, MemoryResumeStore, approvedArgs, askArbiter, decisionType } from "../src/langgraph.js";
import { ArbiterApprovals } from "../src/openai-agents.js";
import { Reviewer, serverForTests, waitFor } from "./harness.js";

setTracingDisabled(true);

let arbiter: Arbiter;
let reviewer: Reviewer;
const { server } = serverForTests((s) => ({ arbiter, reviewer } = s));

const schema = { type: "object", properties: { order: { type: "string" }, amount: { type: "number", minimum: 0, maximum: 1000 } } };

async function waiting(id: string): Promise<void> {
  await waitFor(async () => (await arbiter.getTask(id)).status === "human_needed", "the task to reach a person");
}

/** A task's copy with its approved amount changed, as a payload rewritten on its way. */
function tampered(task: Task): Task {
  const a = task.approved_action!;
  return { ...task, approved_action: { ...a, args: { ...(a.args as Record<string, unknown>), amount: 4200 } } };
}

/**
 * Whether e is an ActionDigestMismatch, or an error that wraps one (the
 * Agents SDK's ToolCallError holds it in .error).
 */
function refusedAsChanged(e: unknown): boolean {
  for (let x = e; x; x = (x as { cause?: unknown }).cause ?? (x as { error?: unknown }).error) {
    if (x instanceof ActionDigestMismatch) return true;
  }
  return false;
}

describe("LangGraph", () => {
  const State = Annotation.Root({ order: Annotation<string>(), outcome: Annotation<string>() });
  function shop() {
    const refunds: Array<[string, number]> = [];
    const graph = new StateGraph(State)
      .addNode("refund", async (s: typeof State.State) => {
        const args = { order: s.order, amount: 420 };
        const d = askArbiter(`Refund ${s.order}?`, ["approve", "reject"], undefined,
          { action: { name: "issue_refund", args, schema, editable: ["amount"] } });
        if (decisionType(d) === "reject") return { outcome: "rejected" };
        const approved = await approvedArgs(d, "issue_refund", args);
        refunds.push([approved.order as string, approved.amount as number]);
        return { outcome: decisionType(d) };
      })
      .addEdge(START, "refund")
      .addEdge("refund", END)
      .compile({ checkpointer: new MemorySaver() });
    return { graph, refunds };
  }
  async function paused(graph: ReturnType<typeof shop>["graph"]) {
    const config = { configurable: { thread_id: "thread-" + randomBytes(4).toString("hex") } };
    const order = "ord_" + randomBytes(3).toString("hex");
    assert.ok(((await graph.invoke({ order }, config)) as Record<string, unknown>).__interrupt__, "the graph did not pause");
    const bridge = new LangGraphBridge({ arbiter, store: new MemoryResumeStore() });
    const [task] = await bridge.submit(graph, config);
    await waiting(task!.id);
    return { bridge, task: task!, order };
  }

  it("runs the amount a person edited on the desk", async () => {
    const { graph, refunds } = shop();
    const { bridge, task, order } = await paused(graph);
    await reviewer.decide(task.id, "approve", "Half, as agreed.", { amount: "210" });
    const decided = await arbiter.waitTask(task.id, { timeoutMs: 60_000 });
    const a = await approvedAction(decided, "approve");
    assert.ok(a.edited);
    assert.deepEqual(a.args, { order, amount: 210 });
    const result = (await bridge.resume(graph, decided)) as { outcome: string };
    assert.equal(result.outcome, "edit");
    assert.deepEqual(refunds, [[order, 210]]);
    // The receipt verifies with WebCrypto against the server's keys.
    const jwks = (await (await fetch(server.baseURL + "/.well-known/arbiter/jwks.json")).json()) as JWKS;
    const claims = await verifyReceipt(decided.receipt!, jwks);
    assert.equal(claims.task_id, task.id);
    assert.equal(claims.action_digest, a.digest);
  });

  it("refuses arguments changed after the approval", async () => {
    const { graph, refunds } = shop();
    const { bridge, task } = await paused(graph);
    await reviewer.decide(task.id, "approve", "Fine.");
    const decided = await arbiter.waitTask(task.id, { timeoutMs: 60_000 });
    await assert.rejects(bridge.resume(graph, tampered(decided)), ActionDigestMismatch);
    assert.deepEqual(refunds, []);
  });
});

describe("OpenAI Agents", () => {
  class RefundModel implements Model {
    private calls = 0;
    constructor(private readonly callId = "call_" + randomBytes(4).toString("hex")) {}
    async getResponse(_request: ModelRequest): Promise<ModelResponse> {
      if (++this.calls === 1) {
        return { usage: new Usage(), output: [{ type: "function_call", callId: this.callId, name: "issue_refund", arguments: JSON.stringify({ order: "ord_1", amount: 420 }), status: "completed" }] };
      }
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "All done." }] }] };
    }
    getStreamedResponse(): AsyncIterable<never> {
      throw new Error("not streamed");
    }
  }
  function support() {
    const refunds: Array<[string, number]> = [];
    const approvals = new ArbiterApprovals({ arbiter, store: new MemoryResumeStore(), agentWaitSeconds: 0,
      editable: { issue_refund: ["amount"] }, schemas: { issue_refund: schema } });
    const issueRefund = approvals.guard(agentTool({
      name: "issue_refund",
      description: "Refunds an order.",
      parameters: z.object({ order: z.string(), amount: z.number() }),
      needsApproval: approvals.needsApproval("issue_refund"),
      execute: async ({ order, amount }) => {
        refunds.push([order, amount]);
        return `refunded ${amount} on ${order}`;
      },
    }));
    return { approvals, refunds, agent: new Agent({ name: "support", model: new RefundModel(), tools: [issueRefund] }) };
  }
  async function paused(s: ReturnType<typeof support>) {
    const runId = "run-" + randomBytes(4).toString("hex");
    const result = await run(s.agent, "Refund ord_1", { context: { runId } });
    assert.equal(result.interruptions.length, 1);
    const [task] = await s.approvals.submit(result.interruptions, runId);
    await waiting(task!.id);
    return { task: task!, saved: result.state.toString() };
  }

  it("runs the amount a person edited on the desk", async () => {
    const s = support();
    const { task, saved } = await paused(s);
    await reviewer.decide(task.id, "approve", "Half.", { amount: "210" });
    const decided = await arbiter.waitTask(task.id, { timeoutMs: 60_000 });
    const result = await s.approvals.resume(s.agent, saved, decided);
    assert.equal(result?.finalOutput, "All done.");
    assert.deepEqual(s.refunds, [["ord_1", 210]]);
  });

  it("refuses arguments changed after the approval", async () => {
    const s = support();
    const { task, saved } = await paused(s);
    await reviewer.decide(task.id, "approve", "Fine.");
    const decided = await arbiter.waitTask(task.id, { timeoutMs: 60_000 });
    // The saved run is changed after the approval: the pending call now
    // refunds 990 (within the schema, so only the digest can tell).
    const changed = saved.replaceAll('\\"amount\\":420', '\\"amount\\":990');
    assert.notEqual(changed, saved, "the saved state does not hold the call's arguments as expected");
    await assert.rejects(s.approvals.resume(s.agent, changed, decided), refusedAsChanged);
    assert.deepEqual(s.refunds, []);
  });
});

describe("AI SDK", () => {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  };
  function model(): MockLanguageModelV4 {
    const callId = "call_" + randomBytes(4).toString("hex");
    let step = 0;
    return new MockLanguageModelV4({
      doGenerate: async () => {
        if (++step === 1) {
          return { content: [{ type: "tool-call", toolCallId: callId, toolName: "issueRefund", input: JSON.stringify({ order: "ord_1", amount: 420 }) }],
            finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] };
        }
        return { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
      },
    });
  }
  async function decided(verdictEdits: Record<string, string>, rewrite?: (m: ModelMessage[]) => ModelMessage[]) {
    const conversation = "conv-" + randomBytes(4).toString("hex");
    const approvals = new ArbiterToolApproval({ arbiter, store: new MemoryResumeStore(), agentWaitSeconds: 0,
      editable: { issueRefund: ["amount"] }, schemas: { issueRefund: schema } });
    const refunds: Array<[string, number]> = [];
    const tools = {
      issueRefund: aiTool({
        description: "Refunds an order.",
        inputSchema: z.object({ order: z.string(), amount: z.number() }),
        execute: approvals.guard(conversation, "issueRefund", async ({ order, amount }: { order: string; amount: number }) => {
          refunds.push([order, amount]);
          return `refunded ${amount} on ${order}`;
        }),
      }),
    };
    const m = model();
    let messages: ModelMessage[] = [{ role: "user", content: "Refund ord_1" }];
    const first = await generateText({ model: m, tools, messages, toolApproval: approvals.rule(conversation) });
    messages.push(...first.responseMessages);
    const [taskId] = await approvals.submit(first.content, conversation);
    await waiting(taskId!);
    await reviewer.decide(taskId!, "approve", "Checked.", verdictEdits);
    const task = await arbiter.waitTask(taskId!, { timeoutMs: 60_000 });
    messages.push((await approvals.response(task))!);
    if (rewrite) messages = rewrite(messages);
    return { refunds, second: generateText({ model: m, tools, messages, toolApproval: approvals.rule(conversation) }) };
  }

  it("runs the amount a person edited on the desk", async () => {
    const { refunds, second } = await decided({ amount: "210" });
    await second;
    assert.deepEqual(refunds, [["ord_1", 210]]);
  });

  it("refuses arguments changed after the approval", async () => {
    // The conversation's tool call is rewritten before it runs (to 990,
    // within the schema, so only the digest can tell).
    const { refunds, second } = await decided({}, (messages) =>
      JSON.parse(JSON.stringify(messages).replaceAll('\\"amount\\":420', '\\"amount\\":990').replaceAll('"amount":420', '"amount":990')));
    await assert.rejects(second, refusedAsChanged);
    assert.deepEqual(refunds, []);
  });
});
