/**
 * @arbiterhq/sdk/ai against the AI SDK's real package (its mock language
 * model: no LLM is called) and a real server.
 */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import { generateText, tool, type ModelMessage } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";

import { Arbiter } from "../src/index.js";
import { ArbiterToolApproval, MemoryResumeStore } from "../src/ai.js";
import { Reviewer, serverForTests, waitFor } from "./harness.js";

let arbiter: Arbiter;
let reviewer: Reviewer;
const { server } = serverForTests((s) => ({ arbiter, reviewer } = s));

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model that calls issueRefund once, then answers with what it saw last. */
function refundModel(amount: number): MockLanguageModelV4 {
  const callId = "call_" + randomBytes(4).toString("hex");
  let step = 0;
  return new MockLanguageModelV4({
    doGenerate: async (opts) => {
      step++;
      if (step === 1) {
        return {
          content: [{ type: "tool-call", toolCallId: callId, toolName: "issueRefund", input: JSON.stringify({ order: "ord_1", amount }) }],
          finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [],
        };
      }
      return { content: [{ type: "text", text: "saw: " + JSON.stringify(opts.prompt.at(-1)) }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
    },
  });
}

function shop() {
  const refunds: string[] = [];
  const issueRefund = tool({
    description: "Refunds an order.",
    inputSchema: z.object({ order: z.string(), amount: z.number() }),
    execute: async ({ order }: { order: string }) => {
      refunds.push(order);
      return `refunded ${order}`;
    },
  });
  return { refunds, tools: { issueRefund } };
}

describe("ArbiterToolApproval", () => {
  for (const [verdict, ran] of [["approve", true], ["reject", false]] as const) {
    it(`a person's ${verdict} reaches the conversation once`, async () => {
      const conversation = "conv-" + randomBytes(4).toString("hex");
      const store = new MemoryResumeStore();
      const approvals = new ArbiterToolApproval({ arbiter, store, agentWaitSeconds: 0 });
      const { refunds, tools } = shop();
      const model = refundModel(420);
      const messages: ModelMessage[] = [{ role: "user", content: "Refund ord_1" }];
      const first = await generateText({ model, tools, messages, toolApproval: approvals.rule(conversation) });
      messages.push(...first.responseMessages);
      const [taskId] = await approvals.submit(first.content, conversation);
      assert.ok(taskId, "no approval request waits for a person");
      assert.deepEqual(refunds, []);

      await waitFor(async () => (await arbiter.getTask(taskId)).status === "human_needed", "the task to reach a person");
      await reviewer.decide(taskId, verdict, "Checked against the order.");
      const decided = await arbiter.waitTask(taskId, { timeoutMs: 60_000 });

      // A restarted process (new adapter, same store) and a duplicate delivery.
      const other = new ArbiterToolApproval({ arbiter, store });
      const replies = await Promise.all([approvals.response(decided), other.response(decided)]);
      const reply = replies.find((r) => r !== undefined);
      assert.equal(replies.filter((r) => r !== undefined).length, 1);
      messages.push(reply!);
      const second = await generateText({ model, tools, messages, toolApproval: approvals.rule(conversation) });
      assert.deepEqual(refunds, ran ? ["ord_1"] : []);
      if (!ran) assert.match(second.text, /Checked against the order/);
    });
  }

  it("the verifier's confident verdict answers at once", async () => {
    const approvals = new ArbiterToolApproval({ arbiter, store: new MemoryResumeStore(), agentWaitSeconds: 30, fields: { confidence_threshold: 0.5 } });
    const { refunds, tools } = shop();
    const model = refundModel(5);
    const conversation = "conv-" + randomBytes(4).toString("hex");
    const result = await generateText({ model, tools, messages: [{ role: "user", content: "Refund ord_1" }], toolApproval: approvals.rule(conversation), stopWhen: () => false });
    assert.deepEqual(await approvals.submit(result.content, conversation), []);
    assert.deepEqual(refunds, ["ord_1"]);
  });
});
