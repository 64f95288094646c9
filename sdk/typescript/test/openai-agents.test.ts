/**
 * @arbiterhq/sdk/openai-agents against the OpenAI Agents SDK's real package
 * (a fake Model class, as the SDK lets one be passed: no LLM is called) and
 * a real server.
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import { Agent, RunState, Usage, run, setTracingDisabled, tool, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";

import { Arbiter } from "../src/index.js";
import { ArbiterApprovals, MemoryResumeStore } from "../src/openai-agents.js";
import { Reviewer, serverForTests, waitFor } from "./harness.js";

setTracingDisabled(true);

let arbiter: Arbiter;
let reviewer: Reviewer;
const { server } = serverForTests((s) => ({ arbiter, reviewer } = s));

/** Calls issue_refund once, then answers with the last input it was given. */
class RefundModel implements Model {
  calls: ModelRequest[] = [];
  constructor(private readonly amount: number, private readonly callId = "call_" + randomBytes(4).toString("hex")) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.calls.push(request);
    if (this.calls.length === 1) {
      return { usage: new Usage(), output: [{ type: "function_call", callId: this.callId, name: "issue_refund", arguments: JSON.stringify({ order: "ord_1", amount: this.amount }), status: "completed" }] };
    }
    return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "All done." }] }] };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not streamed");
  }
}

function supportAgent(approvals: ArbiterApprovals, amount: number) {
  const refunds: string[] = [];
  const model = new RefundModel(amount);
  const issueRefund = tool({
    name: "issue_refund",
    description: "Refunds an order.",
    parameters: z.object({ order: z.string(), amount: z.number() }),
    needsApproval: approvals.needsApproval("issue_refund"),
    execute: async ({ order }) => {
      refunds.push(order);
      return `refunded ${order}`;
    },
  });
  return { agent: new Agent({ name: "support", model, tools: [issueRefund] }), model, refunds };
}

describe("ArbiterApprovals", () => {
  for (const [verdict, ran] of [["approve", true], ["reject", false]] as const) {
    it(`a person's ${verdict} resumes the run once, after a restart`, async () => {
      const store = new MemoryResumeStore();
      const runId = "run-" + randomBytes(4).toString("hex");
      const approvals = new ArbiterApprovals({ arbiter, store, agentWaitSeconds: 0 });
      const { agent, model, refunds } = supportAgent(approvals, 420);
      const result = await run(agent, "Refund ord_1", { context: { runId } });
      assert.equal(result.interruptions.length, 1);
      const [task] = await approvals.submit(result.interruptions, runId);
      const saved = result.state.toString();

      // A restarted process: a new adapter over the same store re-attaches.
      const restarted = new ArbiterApprovals({ arbiter, store });
      const [again] = await restarted.submit((await RunState.fromString(agent, saved)).getInterruptions(), runId);
      assert.equal(again!.id, task!.id);

      await waitFor(async () => (await arbiter.getTask(task!.id)).status === "human_needed", "the task to reach a person");
      await reviewer.decide(task!.id, verdict, "Checked against the order.");
      const decided = await arbiter.waitTask(task!.id, { timeoutMs: 60_000 });
      const [one, two] = await Promise.all([restarted.resume(agent, saved, decided), approvals.resume(agent, saved, decided)]);
      assert.equal([one, two].filter((r) => r !== undefined).length, 1, "the decision delivered twice resumed twice");
      assert.equal((one ?? two)!.finalOutput, "All done.");
      assert.deepEqual(refunds, ran ? ["ord_1"] : []);
      if (!ran) assert.match(JSON.stringify(model.calls.at(-1)?.input), /Checked against the order/);
    });
  }

  it("the verifier lets a small refund run without a pause", async () => {
    const approvals = new ArbiterApprovals({ arbiter, store: new MemoryResumeStore(), agentWaitSeconds: 30 });
    const { agent, refunds } = supportAgent(approvals, 5);
    const result = await run(agent, "Refund ord_1", { context: { runId: "run-" + randomBytes(4).toString("hex") } });
    assert.equal(result.interruptions.length, 0);
    assert.equal(result.finalOutput, "All done.");
    assert.deepEqual(refunds, ["ord_1"]);
  });
});
