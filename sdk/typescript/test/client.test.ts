/** The client against a real server. */

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import {
  APIConnectionError, Arbiter, BadRequest, DEFAULT_WAIT_SECONDS, IdempotencyMismatch, NotFound, PayloadTooLarge, RateLimited,
  Unauthorized, Unavailable, WaitTimeout, WebhookVerificationError, rationaleOf, verifyWebhook, type Task,
} from "../src/index.js";
import { Proxy, Receiver, Reviewer, newAccount, serverForTests, waitFor } from "./harness.js";

let arbiter: Arbiter;
let reviewer: Reviewer;
let key = "";
const { server } = serverForTests((s) => ({ arbiter, reviewer, key } = s));

const source = () => "sdk-ts-" + randomBytes(4).toString("hex");

async function humanNeeded(id: string): Promise<void> {
  await waitFor(async () => (await arbiter.getTask(id)).status === "human_needed", "the task to reach a person");
}

describe("Arbiter", () => {
  // The shortest deadline is 60 s: the task is made first and waited for
  // last, so the other tests pass the time.
  let expiring: Promise<Task> | undefined;

  let fallbackSource = "";

  it("makes a task with the shortest deadline", async () => {
    fallbackSource = source();
    await arbiter.createTask({ prompt: "Decided at the deadline.", allowed_verdicts: ["yes", "no"], deadline_seconds: 60, on_expiry: "verdict:no", source: fallbackSource });
    const task = await arbiter.createTask({ prompt: "Nobody will answer this.", allowed_verdicts: ["yes", "no"], deadline_seconds: 60 });
    assert.ok(task.deadline_at !== null && Math.abs(task.deadline_at - (task.created_at + 60)) < 0.002, `deadline_at ${task.deadline_at}`);
    expiring = Promise.resolve(task);
  });

  it("asks and returns the agent tier's verdict, typed by the verdicts asked", async () => {
    const task = await arbiter.ask("Approve this refund?", ["approve", "reject"], { auto: "approve" }, { wait: 30 });
    const verdict: "approve" | "reject" | null = task.final_verdict;
    // @ts-expect-error "hold" is not one of the verdicts asked
    const other: "hold" | null = task.final_verdict;
    assert.equal(other, "approve");
    assert.equal(task.status, "completed");
    assert.equal(verdict, "approve");
    assert.equal(task.final_tier, "agent");
    assert.equal(task.attempts[0]?.model, "rules");
  });

  it("replays an idempotent create and refuses the key for another request", async () => {
    const idempotencyKey = "order-" + randomBytes(6).toString("hex");
    const first = await arbiter.createTask({ prompt: "Refund 1?", allowed_verdicts: ["yes", "no"] }, { idempotencyKey });
    const again = await arbiter.createTask({ prompt: "Refund 1?", allowed_verdicts: ["yes", "no"] }, { idempotencyKey });
    assert.equal(again.id, first.id);
    await assert.rejects(arbiter.createTask({ prompt: "Refund 2?", allowed_verdicts: ["yes", "no"] }, { idempotencyKey }), IdempotencyMismatch);
  });

  it("answers each item of a batch", async () => {
    const k = "batch-" + randomBytes(6).toString("hex");
    const results = await arbiter.createTasks([
      { prompt: "One?", allowed_verdicts: ["yes"], idempotency_key: k },
      { prompt: "", allowed_verdicts: ["yes"] },
      { prompt: "One?", allowed_verdicts: ["yes"], idempotency_key: k },
    ]);
    assert.deepEqual(results.map((r) => r.status), [200, 400, 200]);
    const [a, b, c] = results;
    assert.ok(a?.ok && c?.ok && !b?.ok);
    assert.equal(c.task.id, a.task.id);
    assert.equal(c.replayed, true);
    assert.ok(b !== undefined && !b.ok && b.error instanceof BadRequest);
  });

  it("puts, reads, lists and deletes a policy, which creates take", async () => {
    const taskType = "refund-" + randomBytes(4).toString("hex");
    const put = await arbiter.putPolicy(taskType, {
      confidence_threshold: 0.95, deadline_seconds: 600, on_expiry: "agent_verdict", agent_floor: 0.9, on_expiry_fallback: "verdict:reject",
    });
    assert.equal(put.task_type, taskType);
    assert.equal(put.on_expiry, "agent_verdict");
    assert.equal(put.audit_rate, null);
    assert.deepEqual(await arbiter.getPolicy(taskType), put);
    assert.ok((await arbiter.listPolicies()).some((p) => p.task_type === taskType));
    await assert.rejects(arbiter.putPolicy(taskType, { on_expiry: "agent_verdict" }), BadRequest);

    const task = await arbiter.createTask({ prompt: "Refund?", allowed_verdicts: ["approve", "reject"], task_type: taskType });
    assert.equal(task.confidence_threshold, 0.95);
    assert.ok(task.deadline_at !== null && Math.abs(task.deadline_at - (task.created_at + 600)) < 0.002);

    const routed = await arbiter.putPolicy(taskType, {
      notify: ["slack:#refunds"], reviews_required: 3, consensus: "quorum", quorum: 2, veto: ["reject"], tiebreak: "role:admin",
    });
    assert.deepEqual(
      [routed.notify, routed.reviews_required, routed.consensus, routed.quorum, routed.veto, routed.exclude_requester, routed.tiebreak],
      [["slack:#refunds"], 3, "quorum", 2, ["reject"], false, "role:admin"],
    );
    assert.equal(routed.confidence_threshold, null);
    assert.deepEqual(await arbiter.getPolicy(taskType), routed);
    await assert.rejects(arbiter.putPolicy(taskType, { notify: ["#refunds"] }), BadRequest);
    const voted = await arbiter.createTask({ prompt: "Refund?", allowed_verdicts: ["approve", "reject"], task_type: taskType });
    assert.equal(voted.review?.reviews_required, 3);
    assert.equal(voted.review?.quorum, 2);

    await arbiter.deletePolicy(taskType);
    await assert.rejects(arbiter.getPolicy(taskType), NotFound);
    await assert.rejects(arbiter.deletePolicy(taskType), NotFound);
  });

  it("lists through several pages", async () => {
    const src = source();
    const made = await arbiter.createTasks(Array.from({ length: 7 }, (_, i) => ({ prompt: `T${i}?`, allowed_verdicts: ["yes"], source: src })));
    const ids = new Set(made.flatMap((r) => (r.ok ? [r.task.id] : [])));
    const listed: Task[] = [];
    for await (const t of arbiter.listTasks({ source: src, limit: 3 })) listed.push(t);
    assert.equal(listed.length, 7);
    assert.deepEqual(new Set(listed.map((t) => t.id)), ids);
  });

  it("answers a page with has_more and the starting_after of the next", async () => {
    const src = source();
    await arbiter.createTasks(Array.from({ length: 5 }, (_, i) => ({ prompt: `P${i}?`, allowed_verdicts: ["yes"], source: src })));
    const whole = await arbiter.listTasks({ source: src, limit: 100 });
    const order = whole.tasks.map((t) => t.id);
    assert.equal(order.length, 5);
    assert.equal(whole.has_more, false);
    assert.equal(whole.starting_after, undefined);
    const page = await arbiter.listTasks({ source: src, limit: 2 });
    assert.deepEqual(page.tasks.map((t) => t.id), order.slice(0, 2));
    assert.equal(page.has_more, true);
    assert.equal(page.starting_after, order[1]);
    const second = await page.nextPage();
    assert.deepEqual(second?.tasks.map((t) => t.id), order.slice(2, 4));
    const byCursor = await arbiter.listTasks({ source: src, limit: 2, starting_after: page.starting_after });
    assert.deepEqual(byCursor.tasks.map((t) => t.id), order.slice(2, 4));
    const last = await second!.nextPage();
    assert.deepEqual(last?.tasks.map((t) => t.id), order.slice(4));
    assert.equal(last?.has_more, false);
    assert.equal(await last!.nextPage(), undefined);
    const fromPage: string[] = [];
    for await (const t of page) fromPage.push(t.id);
    assert.deepEqual(fromPage, order);
  });

  it("waits until a person decides on the desk", async () => {
    const task = await arbiter.createTask({ prompt: "Ship to a new address?", allowed_verdicts: ["ship", "hold"] });
    await humanNeeded(task.id);
    const waiting = arbiter.waitTask(task.id, { timeoutMs: 60_000 });
    await reviewer.decide(task.id, "hold", "The address changed an hour ago.");
    const done = await waiting;
    assert.equal(done.status, "completed");
    assert.equal(done.final_verdict, "hold");
    assert.equal(done.final_tier, "human");
    assert.equal(rationaleOf(done), "The address changed an hour ago.");
  });

  it("sends a gold task to a person and completes it with its gold verdict", async () => {
    const task = await arbiter.createTask({ prompt: "Ship to a new address?", allowed_verdicts: ["ship", "hold"], gold_verdict: "hold" });
    assert.equal(task.status, "human_needed");
    assert.equal((await arbiter.getTask(task.id)).gold_verdict, "hold");
    await reviewer.decide(task.id, "ship", "Looks fine.");
    const done = await arbiter.waitTask(task.id, { timeoutMs: 60_000 });
    assert.equal(done.final_verdict, "hold");
    assert.equal(done.final_tier, "human");
    assert.equal(done.attempts.at(-1)?.verdict, "ship");
  });

  it("gives up waiting with the last task read, never before the time given", async () => {
    const task = await arbiter.createTask({ prompt: "Nobody looks?", allowed_verdicts: ["yes"] });
    for (const timeoutMs of [1500, 400]) {
      const start = Date.now();
      await assert.rejects(arbiter.waitTask(task.id, { timeoutMs }), (e: unknown) => e instanceof WaitTimeout && e.task?.id === task.id);
      assert.ok(Date.now() - start >= timeoutMs, `gave up after ${Date.now() - start} ms of ${timeoutMs}`);
    }
    assert.ok(DEFAULT_WAIT_SECONDS > 0 && Number.isFinite(DEFAULT_WAIT_SECONDS));
  });

  it("reads the key and the address from either name, the specification's first", async () => {
    const saved = { ...process.env };
    try {
      for (const name of ["SVC_API_KEY", "SVC_BASE_URL", "ARBITER_API_KEY", "ARBITER_BASE_URL"]) delete process.env[name];
      process.env.ARBITER_API_KEY = key;
      process.env.ARBITER_BASE_URL = server.baseURL;
      const named = new Arbiter();
      assert.equal(named.baseURL, server.baseURL);
      assert.ok((await named.createTask({ prompt: "Named for the service?", allowed_verdicts: ["yes"] })).id.startsWith("tsk_"));
      process.env.SVC_BASE_URL = "http://127.0.0.1:9";
      assert.equal(new Arbiter().baseURL, "http://127.0.0.1:9");
      delete process.env.ARBITER_API_KEY;
      assert.throws(() => new Arbiter(), /SVC_API_KEY \(or ARBITER_API_KEY\)/);
    } finally {
      process.env = saved;
    }
  });

  it("throws typed errors", async () => {
    await assert.rejects(arbiter.createTask({ prompt: "T?", allowed_verdicts: ["yes"], confidence_threshold: 1.5 }),
      (e: unknown) => e instanceof BadRequest && e.status === 400 && e.message.includes("confidence_threshold") &&
        e.code === "invalid_field" && e.field === "confidence_threshold" && (e.requestId ?? "").startsWith("req_"));
    await assert.rejects(new Arbiter({ apiKey: "svc_live_" + "0".repeat(28), baseURL: server.baseURL }).getTask("tsk_0000000000000000"), Unauthorized);
    const other = new Arbiter({ apiKey: newAccount(server).key, baseURL: server.baseURL });
    const theirs = await other.createTask({ prompt: "Theirs?", allowed_verdicts: ["yes"] });
    await assert.rejects(arbiter.getTask(theirs.id), NotFound);
    await assert.rejects(arbiter.createTask({ prompt: "Big?", allowed_verdicts: ["yes"], context: { blob: "x".repeat(1 << 20) } }), PayloadTooLarge);
    await assert.rejects(new Arbiter({ apiKey: key, baseURL: "http://127.0.0.1:9", maxRetries: 0 }).getTask("tsk_0000000000000000"), APIConnectionError);
    assert.throws(() => new Arbiter({ apiKey: "" }), /SVC_API_KEY/);
  });

  for (const status of [429, 503, 409]) {
    it(`waits the Retry-After of a ${status} and makes the task once`, async () => {
      const proxy = new Proxy(server.baseURL, [[status, { "Retry-After": "1" }]]);
      await proxy.start();
      try {
        const src = source();
        const task = await new Arbiter({ apiKey: key, baseURL: proxy.url }).createTask({ prompt: "Retried?", allowed_verdicts: ["yes"], source: src });
        assert.equal(proxy.seen.length, 2);
        const [a, b] = proxy.seen;
        assert.ok(b!.at - a!.at >= 1000, "the retry came before Retry-After");
        assert.ok(a!.key && a!.key === b!.key, "a retry must carry the same idempotency key");
        const listed: string[] = [];
        for await (const t of arbiter.listTasks({ source: src })) listed.push(t.id);
        assert.deepEqual(listed, [task.id]);
      } finally {
        await proxy.close();
      }
    });
  }

  it("raises Unavailable once the retries run out, and RateLimited past the longest wait", async () => {
    const proxy = new Proxy(server.baseURL, [[503, { "Retry-After": "0" }], [503, { "Retry-After": "0" }], [503, { "Retry-After": "0" }], [429, { "Retry-After": "120" }]]);
    await proxy.start();
    try {
      const c = new Arbiter({ apiKey: key, baseURL: proxy.url, maxRetries: 2, maxRetryWaitMs: 5000 });
      await assert.rejects(c.getTask("tsk_0000000000000000"), (e: unknown) => e instanceof Unavailable && e.retryAfter === 0);
      assert.equal(proxy.seen.length, 3);
      await assert.rejects(c.createTask({ prompt: "Later?", allowed_verdicts: ["yes"] }), (e: unknown) => e instanceof RateLimited && e.retryAfter === 120);
      assert.equal(proxy.seen.length, 4);
    } finally {
      await proxy.close();
    }
  });

  it("verifies the webhooks the server sent and refuses a tampered one", async () => {
    const receiver = new Receiver();
    await receiver.start();
    try {
      const secret = await reviewer.callbackSecret();
      const task = await arbiter.createTask({ prompt: "Callback?", allowed_verdicts: ["approve", "reject"], context: { auto: "approve" }, callback_url: receiver.url });
      const msg = await waitFor(() => receiver.forTask(task.id, "task.completed"), "the callback");
      const event = await verifyWebhook(msg.body, msg.headers, secret);
      if (event.type !== "task.completed") assert.fail(`event ${event.type}`);
      // The event is typed: a task event's data is the Task.
      const verdict: string | null = event.data.final_verdict;
      const tier: "agent" | "human" | "fallback" | null = event.data.final_tier;
      // @ts-expect-error a Task has no such field
      assert.equal(event.data.context, undefined);
      assert.deepEqual([event.data.id, verdict, tier], [task.id, "approve", "agent"]);
      const tampered = msg.body.toString().replace('"approve"', '"reject"');
      await assert.rejects(verifyWebhook(tampered, msg.headers, secret), WebhookVerificationError);
      await assert.rejects(verifyWebhook(msg.body, msg.headers, "whsec_" + "A".repeat(43) + "="), WebhookVerificationError);
      await assert.rejects(verifyWebhook(msg.body, msg.headers, secret, { now: Number(msg.headers["webhook-timestamp"]) + 301 }), WebhookVerificationError);
    } finally {
      await receiver.close();
    }
  });

  it("waits until the task expired", async () => {
    const made = await expiring!;
    const done = await arbiter.waitTask(made.id, { timeoutMs: 120_000 });
    assert.equal(done.status, "expired");
    assert.equal(done.final_verdict, null);
    assert.ok(done.expired_at !== null && done.expired_at >= made.created_at + 60);
  });

  it("filters by final_tier fallback: the task its on-expiry outcome decided", async () => {
    const decided = await waitFor(async () => {
      const page = await arbiter.listTasks({ source: fallbackSource, final_tier: "fallback" });
      return page.tasks.length > 0 ? page.tasks : undefined;
    }, "the fallback decision");
    assert.equal(decided.length, 1);
    assert.deepEqual([decided[0]!.final_verdict, decided[0]!.final_tier], ["no", "fallback"]);
    assert.equal((await arbiter.listTasks({ source: fallbackSource, final_tier: "human" })).tasks.length, 0);
  });
});
