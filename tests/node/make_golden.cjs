// Writes tests/data/tokenizer/golden_tiny.json: ids from the real tiktoken
// core (@dqbd/tiktoken, WASM) for the corpus strings under 2 KB, with the
// committed tiny vocabulary (tests/data/tokenizer/tiny/) and both split
// patterns. The C++ unit tests compare against this file without node.
"use strict";
const fs = require("fs");
const path = require("path");
const { Tiktoken } = require("@dqbd/tiktoken/lite");
const patterns = require("./patterns.cjs");

const data = path.join(__dirname, "..", "data", "tokenizer");
const corpus = JSON.parse(fs.readFileSync(path.join(data, "corpus.json"), "utf8"));
const ranks = fs.readFileSync(path.join(data, "tiny", "tiktoken.model"), "utf8");
const kimi = new Tiktoken(ranks, {}, patterns.kimi);
const o200k = new Tiktoken(ranks, {}, patterns.o200k);
const cases = corpus.filter((s) => Buffer.byteLength(s, "utf8") < 2048).map((text) => ({
  text,
  kimi: Array.from(kimi.encode_ordinary(text)),
  o200k: Array.from(o200k.encode_ordinary(text)),
}));
const out = { about: "ids of @dqbd/tiktoken (encode_ordinary) with tests/data/tokenizer/tiny; " +
                     "regenerate with node tests/node/make_golden.cjs", cases };
fs.writeFileSync(path.join(data, "golden_tiny.json"),
                 JSON.stringify(out, null, 0).replace(/\},\{/g, "},\n{") + "\n");
console.log(`${cases.length} cases`);
