/**
 * A real `arbiter serve` for the SDK's tests, built from this repository,
 * and what the tests need around it: a reviewer who signs in and decides
 * on the desk, a webhook receiver and a proxy that scripts 429/503 answers.
 */

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync, openSync } from "node:fs";
import { createServer, type IncomingMessage, type Server as HTTPServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";

import { Arbiter } from "../src/index.js";

const repo = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../../..");

export const RULES = `approve 0.99 context.auto == "approve"
reject  0.99 context.auto == "reject"
approve 0.99 context.tool == "issueRefund" && context.input.amount < 10
approve 0.99 context.tool == "issue_refund" && context.arguments.amount < 10
`;

/** Calls check until it returns something truthy; the bound only ends a failing test. */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 30_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await check();
    if (got) return got as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

function psql(adminURL: string, sql: string): void {
  execFileSync("psql", ["-w", "-q", adminURL, "-c", sql], { stdio: "inherit" });
}

/** One `arbiter serve` on a free loopback port with the rules backend. */
export class Server {
  readonly dir = mkdtempSync(join(tmpdir(), "arbiter-ts-"));
  baseURL = "";
  private proc?: ChildProcess;
  private bin = "";
  private env: Record<string, string> = {};
  private pg?: { admin: string; name: string };

  async start(): Promise<void> {
    this.bin = process.env.ARBITER_BIN ?? join(this.dir, "arbiter");
    if (!process.env.ARBITER_BIN) execFileSync("go", ["build", "-o", this.bin, "./cmd/arbiter"], { cwd: repo, stdio: "inherit" });
    let dbURL = "sqlite:" + join(this.dir, "arbiter.db");
    const pgURL = process.env.ARBITER_TEST_DATABASE_URL;
    if (pgURL) {
      const name = "arbiter_ts_" + randomBytes(4).toString("hex");
      const u = new URL(pgURL);
      u.pathname = "/postgres";
      this.pg = { admin: u.toString(), name };
      psql(this.pg.admin, `CREATE DATABASE ${name}`);
      u.pathname = "/" + name;
      dbURL = u.toString();
    } else if (process.env.ARBITER_TEST_REQUIRE_POSTGRES === "1") {
      throw new Error("ARBITER_TEST_REQUIRE_POSTGRES=1 but ARBITER_TEST_DATABASE_URL is unset");
    }
    const rules = join(this.dir, "rules.txt");
    writeFileSync(rules, RULES);
    const port = await freePort();
    this.baseURL = `http://127.0.0.1:${port}`;
    this.env = {
      ...(process.env as Record<string, string>),
      ARBITER_ADDR: `127.0.0.1:${port}`,
      ARBITER_DATABASE_URL: dbURL,
      ARBITER_AGENT: "rules",
      ARBITER_AGENT_RULES: rules,
      ARBITER_WEBHOOK_ALLOW_PRIVATE: "1",
    };
    const log = openSync(join(this.dir, "serve.log"), "w");
    this.proc = spawn(this.bin, ["serve"], { env: this.env, stdio: ["ignore", log, log] });
    await waitFor(async () => {
      if (this.proc?.exitCode !== null) throw new Error("arbiter serve exited:\n" + this.log());
      try {
        return (await fetch(this.baseURL + "/healthz")).status === 200;
      } catch {
        return false;
      }
    }, "arbiter serve to answer /healthz");
  }

  log(): string {
    return readFileSync(join(this.dir, "serve.log"), "utf8");
  }

  /** A new account owned by email; returns its API key. */
  newAccount(email: string): string {
    return execFileSync(this.bin, ["admin", "create-key", "--email", email], { env: this.env }).toString().trim();
  }

  async stop(): Promise<void> {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc!.once("exit", r));
      this.proc.kill("SIGTERM");
      await exited;
    }
    if (this.pg) psql(this.pg.admin, `DROP DATABASE IF EXISTS ${this.pg.name} WITH (FORCE)`);
  }
}

/** A person on the reviewer site, signed in with the logged e-mail link. */
export class Reviewer {
  private readonly cookies = new Map<string, string>();
  constructor(private readonly server: Server, readonly email: string) {}

  private async post(path: string, form: Record<string, string>): Promise<Response> {
    const res = await fetch(this.server.baseURL + path, {
      method: "POST",
      redirect: "manual",
      headers: {
        Origin: this.server.baseURL,
        Cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams(form),
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const eq = pair!.indexOf("=");
      this.cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    return res;
  }

  async signIn(): Promise<void> {
    const seen = this.server.log().split("sign-in link").length;
    const res = await this.post("/signin/email", { email: this.email, next: "/" });
    if (res.status !== 200) throw new Error(`sign-in request: ${res.status}`);
    const re = new RegExp(`to=${this.email.replace(/[.]/g, "\\.")} url="[^"]*token=([0-9a-f]+)"`, "g");
    const token = await waitFor(() => {
      const log = this.server.log();
      if (log.split("sign-in link").length <= seen) return undefined;
      const all = [...log.matchAll(re)];
      return all.length ? all[all.length - 1]![1] : undefined;
    }, "the logged sign-in link");
    const confirm = await this.post("/signin/email/confirm", { token, next: "/" });
    if (confirm.status !== 303) throw new Error(`sign-in confirm: ${confirm.status}`);
  }

  /**
   * Decides a task waiting for a person, as the desk's form does: the page
   * first, whose form carries the digest of the action it shows; `edits`
   * are what the person types in the action's edit inputs, by member.
   */
  async decide(taskID: string, verdict: string, rationale = "", edits: Record<string, string> = {}): Promise<void> {
    const page = await fetch(this.server.baseURL + `/review/tasks/${taskID}`, {
      headers: { Cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ") },
    });
    const html = await page.text();
    if (page.status !== 200) throw new Error(`open the desk: ${page.status} ${html.slice(0, 300)}`);
    const form: Record<string, string> = { verdict, rationale };
    const digest = /name="action_digest" value="([^"]+)"/.exec(html);
    if (digest) form.action_digest = digest[1]!;
    for (const [name, value] of Object.entries(edits)) {
      if (!html.includes(`name="arg.${name}"`)) throw new Error(`the desk offers no edit of ${name}`);
      form[`arg.${name}`] = value;
    }
    const res = await this.post(`/review/tasks/${taskID}`, form);
    if (res.status !== 303) throw new Error(`decide: ${res.status} ${await res.text()}`);
  }

  /** The account's callback signing secret, revealed on /webhooks. */
  async callbackSecret(): Promise<string> {
    const res = await this.post("/webhooks/callback-secret/reveal", {});
    const m = /whsec_[A-Za-z0-9+/=]+/.exec(await res.text());
    if (!m) throw new Error("no secret on the webhooks page");
    return m[0];
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((r) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => r(Buffer.concat(chunks)));
  });
}

/** An HTTP server on loopback that records the messages posted to it. */
export class Receiver {
  readonly messages: Array<{ headers: Record<string, string>; body: Buffer }> = [];
  private server?: HTTPServer;
  url = "";

  async start(): Promise<void> {
    this.server = createServer(async (req, res) => {
      const body = await readBody(req);
      this.messages.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(204).end();
    });
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/hook`;
  }

  forTask(id: string, type: string): { headers: Record<string, string>; body: Buffer } | undefined {
    return this.messages.find((m) => {
      const msg = JSON.parse(m.body.toString()) as { type: string; data: { id: string } };
      return msg.type === type && msg.data.id === id;
    });
  }

  close(): Promise<void> {
    return new Promise((r) => this.server!.close(() => r()));
  }
}

/** Answers the first requests from a script, then passes every request through. */
export class Proxy {
  readonly seen: Array<{ at: number; method: string; key: string | undefined }> = [];
  private server?: HTTPServer;
  url = "";
  constructor(private readonly upstream: string, private readonly script: Array<[number, Record<string, string>]>) {}

  async start(): Promise<void> {
    this.server = createServer(async (req, res) => {
      const body = await readBody(req);
      this.seen.push({ at: Date.now(), method: req.method!, key: req.headers["idempotency-key"] as string | undefined });
      const canned = this.script.shift();
      if (canned) {
        res.writeHead(canned[0], { ...canned[1], "Content-Type": "application/json" }).end(JSON.stringify({ error: "Scripted answer." }));
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && !["host", "content-length", "connection"].includes(k)) headers[k] = v;
      const up = await fetch(this.upstream + req.url, { method: req.method, headers, body: req.method === "GET" ? undefined : new Uint8Array(body) });
      res.writeHead(up.status, { "Content-Type": up.headers.get("content-type") ?? "application/json" }).end(Buffer.from(await up.arrayBuffer()));
    });
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  close(): Promise<void> {
    return new Promise((r) => this.server!.close(() => r()));
  }
}

/** An account: its owner's e-mail and a key. */
export function newAccount(server: Server): { email: string; key: string } {
  const email = `owner-${randomBytes(4).toString("hex")}@example.com`;
  return { email, key: server.newAccount(email) };
}

/** What a test file shares: one server, an account, its client and its owner on the desk. */
export interface Setup {
  server: Server;
  key: string;
  arbiter: Arbiter;
  reviewer: Reviewer;
}

/**
 * Starts a server for the test file with node:test's before and stops it
 * after; the setup's fields are filled in once it runs, and ready (if
 * given) is called with them then. (Node 20 does not wait for one
 * top-level before hook to end before it starts the next.)
 */
export function serverForTests(ready?: (s: Setup) => void): Setup {
  const setup = { server: new Server() } as Setup;
  before(async () => {
    await setup.server.start();
    const account = newAccount(setup.server);
    setup.key = account.key;
    setup.arbiter = new Arbiter({ apiKey: account.key, baseURL: setup.server.baseURL });
    setup.reviewer = new Reviewer(setup.server, account.email);
    await setup.reviewer.signIn();
    ready?.(setup);
  });
  after(() => setup.server.stop());
  return setup;
}
