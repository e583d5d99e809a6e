// The @dqbd/tiktoken (WASM) side of `k3ctl bench tokenizer`: encodes the same
// documents with the same ranks and pattern, prints one JSON line
// {"mb_per_s", "tokens", "checksum", "version"} (best of --rounds).
"use strict";
const fs = require("fs");
const path = require("path");
const { Tiktoken } = require("@dqbd/tiktoken/lite");
const patterns = require("./patterns.cjs");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const ranks = fs.readFileSync(arg("ranks"), "utf8");
const pattern = patterns[arg("pattern", "kimi")];
if (!pattern) throw new Error(`unknown pattern ${arg("pattern")}`);
const docs = JSON.parse(fs.readFileSync(arg("corpus"), "utf8"));
const rounds = Number.parseInt(arg("rounds", "3"), 10);
const enc = new Tiktoken(ranks, {}, pattern);
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, "utf8"), 0);

let best = null;
for (let r = 0; r < rounds; ++r) {
  let tokens = 0;
  let h = 2166136261;
  const t0 = process.hrtime.bigint();
  for (const d of docs) {
    const ids = enc.encode_ordinary(d);
    tokens += ids.length;
    for (let i = 0; i < ids.length; ++i) h = Math.imul(h ^ ids[i], 16777619) >>> 0;
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const run = { mb_per_s: bytes / 1e6 / s, tokens, checksum: h >>> 0 };
  if (best === null || run.mb_per_s > best.mb_per_s) best = run;
}
enc.free();
const version = JSON.parse(fs.readFileSync(
    path.join(__dirname, "node_modules", "@dqbd", "tiktoken", "package.json"), "utf8")).version;
console.log(JSON.stringify({ ...best, version }));
