/** @arbiterhq/sdk/langgraph against LangGraph JS's real package and a real server. */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";

import { Arbiter } from "../src/index.js";
import { LangGraphBridge, MemoryResumeStore, askArbiter } from "../src/langgraph.js";
import { Reviewer, serverForTests, waitFor } from "./harness.js";

let arbiter: Arbiter;
let reviewer: Reviewer;
const { server } = serverForTests((s) => ({ arbiter, reviewer } = s));

const State = Annotation.Root({
  order: Annotation<string>(),
  outcome: Annotation<string>(),
  rationale: Annotation<string>(),
});

function shop() {
  const refunds: string[] = [];
  const graph = new StateGraph(State)
    .addNode("refund", async (s: typeof State.State) => {
      const d = askArbiter(`Refund ${s.order}?`, ["approve", "reject"], { order: s.order });
      if (d.verdict === "approve") refunds.push(s.order);
      return { outcome: d.verdict ?? d.status, rationale: d.rationale };
    })
    .addEdge(START, "refund")
    .addEdge("refund", END)
    .compile({ checkpointer: new MemorySaver() });
  return { graph, refunds };
}

describe("LangGraphBridge", () => {
  for (const [verdict, ran] of [["approve", true], ["reject", false]] as const) {
    it(`a person's ${verdict} resumes the thread once, after a restart`, async () => {
      const { graph, refunds } = shop();
      const store = new MemoryResumeStore();
      const config = { configurable: { thread_id: "thread-" + randomBytes(4).toString("hex") } };
      const paused = (await graph.invoke({ order: "ord_1" }, config)) as Record<string, unknown>;
      assert.ok(paused.__interrupt__, "the graph did not pause");
      const first = new LangGraphBridge({ arbiter, store });
      const [task] = await first.submit(graph, config);
      const restarted = new LangGraphBridge({ arbiter, store });
      const [again] = await restarted.submit(graph, config);
      assert.equal(again!.id, task!.id);

      await waitFor(async () => (await arbiter.getTask(task!.id)).status === "human_needed", "the task to reach a person");
      await reviewer.decide(task!.id, verdict, "Checked against the order.");
      const decided = await arbiter.waitTask(task!.id, { timeoutMs: 60_000 });
      const results = await Promise.all([first.resume(graph, decided), restarted.resume(graph, decided)]);
      const done = results.filter((r) => r !== undefined) as Array<{ outcome: string; rationale: string }>;
      assert.equal(done.length, 1, "the decision delivered twice resumed twice");
      assert.equal(done[0]!.outcome, verdict);
      assert.equal(done[0]!.rationale, "Checked against the order.");
      assert.deepEqual(refunds, ran ? ["ord_1"] : []);
    });
  }
});
