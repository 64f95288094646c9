/**
 * The package as a user installs it: a `file:` dependency on a checkout
 * that was never built, and the tarball `npm pack` makes, each installed
 * into a project of its own (offline: the SDK has no dependencies) and
 * driving a real server through its ES module and its type declarations.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { serverForTests } from "./harness.js";

const sdk = resolve(fileURLToPath(new URL(".", import.meta.url)), "../..");
let key = "";
const { server } = serverForTests((s) => ({ key } = s));

/**
 * A checkout of the package: its sources, no dist/, and its own
 * development dependencies as `npm ci` installs them (offline, from npm's
 * cache; scripts off, so nothing is built yet). Nothing is linked to this
 * repository's node_modules, which npm's installs must not touch.
 */
function checkout(): string {
  const dir = mkdtempSync(join(tmpdir(), "arbiter-sdk-src-"));
  for (const f of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "README.md", "src"]) {
    cpSync(join(sdk, f), join(dir, f), { recursive: true });
  }
  npm(dir, "ci", "--ignore-scripts");
  return dir;
}

function npm(cwd: string, ...args: string[]): string {
  return execFileSync("npm", [...args, "--offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });
}

/** A project of the user's that depends on spec. */
function project(spec: string): string {
  const dir = mkdtempSync(join(tmpdir(), "arbiter-sdk-user-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "user", version: "1.0.0", type: "module", private: true }));
  npm(dir, "install", spec);
  return dir;
}

const SCRIPT = `
import { Arbiter, isFinal } from "@arbiterhq/sdk";
import { ArbiterToolApproval } from "@arbiterhq/sdk/ai";
const arbiter = new Arbiter({ apiKey: process.env.KEY, baseURL: process.env.BASE });
const made = await arbiter.createTask({ prompt: "Installed?", allowed_verdicts: ["yes", "no"], source: process.env.SOURCE });
const read = await arbiter.getTask(made.id);
const page = await arbiter.listTasks({ source: process.env.SOURCE });
console.log(JSON.stringify({ id: made.id, read: read.id, listed: page.tasks.map((t) => t.id), final: isFinal(read),
  adapter: typeof ArbiterToolApproval }));
`;

const TYPED = `
import { Arbiter, type Task } from "@arbiterhq/sdk";
export async function decide(a: Arbiter): Promise<"yes" | "no" | null> {
  const t: Task<"yes" | "no"> = await a.ask("Typed?", ["yes", "no"]);
  return t.final_verdict;
}
`;

/** Type-checks a user's TypeScript against the installed package's declarations. */
function typecheck(dir: string): void {
  writeFileSync(join(dir, "typed.ts"), TYPED);
  execFileSync(join(sdk, "node_modules", ".bin", "tsc"), ["--strict", "--noEmit", "--module", "nodenext", "--moduleResolution", "nodenext",
    "--target", "es2022", "--skipLibCheck", "--types", "node", "--typeRoots", join(sdk, "node_modules", "@types"), "typed.ts"], { cwd: dir, encoding: "utf8" });
}

/** Runs the user's script in dir; returns its answer. */
function use(dir: string, source: string): { id: string; read: string; listed: string[]; final: boolean; adapter: string } {
  writeFileSync(join(dir, "main.mjs"), SCRIPT);
  const out = execFileSync("node", ["main.mjs"], { cwd: dir, encoding: "utf8", env: { ...process.env, KEY: key, BASE: server.baseURL, SOURCE: source } });
  return JSON.parse(out);
}

describe("the package", () => {
  let src = "";
  before(() => {
    src = checkout();
  });

  it("a file: dependency on an unbuilt checkout builds dist/ and works", () => {
    assert.equal(existsSync(join(src, "dist")), false);
    const got = use(project("file:" + src), "file-" + process.pid);
    assert.ok(existsSync(join(src, "dist", "src", "index.js")), "prepare did not build dist/");
    assert.equal(got.read, got.id);
    assert.deepEqual(got.listed, [got.id]);
    assert.ok(existsSync(join(src, "node_modules", "typescript")), "the install removed the checkout's own packages");
  });

  it("npm pack makes a tarball of the built package, which installs and works", () => {
    const out = mkdtempSync(join(tmpdir(), "arbiter-sdk-pack-"));
    const listing = JSON.parse(npm(src, "pack", "--json", "--pack-destination", out)) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const files = listing[0]!.files.map((f) => f.path);
    for (const f of ["dist/src/index.js", "dist/src/index.d.ts", "dist/src/ai.js", "dist/src/wire.d.ts", "package.json"]) {
      assert.ok(files.includes(f), `the tarball lacks ${f}: ${files.join(", ")}`);
    }
    assert.deepEqual(files.filter((f) => f.startsWith("dist/test") || f.startsWith("src/")), []);
    const tarball = join(out, readdirSync(out).find((f) => f.endsWith(".tgz"))!);
    const user = project(tarball);
    typecheck(user);
    const got = use(user, "pack-" + process.pid);
    assert.equal(got.read, got.id);
    assert.deepEqual(got.listed, [got.id]);
    assert.equal(got.adapter, "function");
  });
});
