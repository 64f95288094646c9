// Writes testdata/jcs/digests.json: actions (a name and args, as text in
// varied spellings) with the canonical form of their args and their
// digest, sha256 of the RFC 8785 form of {"args", "name"}, computed here
// the way the RFC's appendix does in ECMAScript (JSON.stringify with
// members sorted), independently of the Go, Python and TypeScript code the
// file checks. Regenerate with: node testdata/jcs/generate-digests.mjs
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
const canon = (v) => {
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v !== null && typeof v === "object") return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  return JSON.stringify(v);
};
const cases = [
  ["issue_refund", '{"amount": 120.50, "currency": "EUR", "order": {"id": 7, "lines": [1, 2]}}'],
  ["issue_refund", '{"order":{"lines":[1,2],"id":7},"currency":"EUR","amount":1.205e2}'],
  ["send_email", '{"to": "ana@example.com", "subject": "Caf\\u00e9 \\ud83d\\ude00", "body": "line1\\nline2\\t\\"quoted\\" \\\\ back", "cc": []}'],
  ["transfer", '{"amount": 0.1, "big": 9007199254740991, "tiny": 1e-7, "huge": 1e21, "neg": -0.0, "flags": [true, false, null]}'],
  ["sort", '{"\\u20ac": 1, "\\r": 2, "\\ufb33": 3, "1": 4, "\\ud83d\\ude00": 5, "\\u0080": 6, "\\u00f6": 7}'],
  ['n\\u00e4me with \\"quotes\\"', '{}'],
];
const out = cases.map(([nameText, args]) => {
  const name = JSON.parse('"' + nameText + '"');
  const canonicalArgs = canon(JSON.parse(args));
  const digest = "sha256:" + createHash("sha256").update(canon({ name, args: JSON.parse(args) }), "utf8").digest("hex");
  return { name, args: JSON.parse(args), args_text: args, canonical_args: canonicalArgs, digest };
});
writeFileSync(new URL("digests.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
