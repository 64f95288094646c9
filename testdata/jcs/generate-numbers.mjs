// Writes testdata/jcs/numbers.txt: IEEE-754 doubles (as 16 hex digits)
// and the text ECMAScript's JSON.stringify gives each, which RFC 8785
// §3.2.2.3 makes their canonical form. The values are the RFC's Appendix
// B table, powers of ten at the edges of plain notation, and doubles from
// a fixed-seed generator over every exponent, so a run makes the same
// file. Regenerate with: node testdata/jcs/generate-numbers.mjs
import { writeFileSync } from "node:fs";

const fixed = [
  "0000000000000000", "8000000000000000", "0000000000000001", "8000000000000001",
  "7fefffffffffffff", "ffefffffffffffff", "4340000000000000", "c340000000000000",
  "4430000000000000", "44b52d02c7e14af5", "44b52d02c7e14af6", "44b52d02c7e14af7",
  "444b1ae4d6e2ef4e", "444b1ae4d6e2ef4f", "444b1ae4d6e2ef50", "3eb0c6f7a0b5ed8c",
  "3eb0c6f7a0b5ed8d", "41b3de4355555553", "41b3de4355555554", "41b3de4355555555",
  "41b3de4355555556", "41b3de4355555557", "becbf647612f3696", "43143ff3c1cb0959",
];
const buf = Buffer.alloc(8);
const hexOf = (x) => { buf.writeDoubleBE(x, 0); return buf.toString("hex"); };
const values = fixed.map((h) => { buf.write(h, "hex"); return buf.readDoubleBE(0); });
for (let e = -30; e <= 30; e++) {
  for (const m of [1, 1.5, 9.999999999999999, 123456789]) values.push(m * 10 ** e, -m * 10 ** e);
}
// xorshift64*, seeded: any bit pattern that is a finite double.
let state = 0x9e3779b97f4a7c15n;
const mask = (1n << 64n) - 1n;
const next = () => {
  state ^= state >> 12n; state ^= (state << 25n) & mask; state ^= state >> 27n;
  return (state * 0x2545f4914f6cdd1dn) & mask;
};
while (values.length < 5000) {
  buf.writeBigUInt64BE(next(), 0);
  const x = buf.readDoubleBE(0);
  if (Number.isFinite(x)) values.push(x);
}
const lines = values.map((x) => `${hexOf(x)},${JSON.stringify(x)}`);
writeFileSync(new URL("numbers.txt", import.meta.url), lines.join("\n") + "\n");
