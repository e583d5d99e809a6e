// Vocabulary files for the references: js-tiktoken's o200k_base ranks as a
// tiktoken.model, and tiktoken.model text as the WASM core wants it.
"use strict";
const fs = require("fs");

// js-tiktoken's compressed form: lines "! OFFSET TOKEN TOKEN ...", token i of
// a line having rank OFFSET + i.
function o200kTiktokenModel() {
  const ranks = require("js-tiktoken/ranks/o200k_base");
  const data = ranks.default || ranks;
  const out = [];
  for (const line of data.bpe_ranks.split("\n")) {
    if (!line) continue;
    const [, offsetText, ...tokens] = line.split(" ");
    const offset = Number.parseInt(offsetText, 10);
    tokens.forEach((t, i) => out.push(`${t} ${offset + i}`));
  }
  return out.join("\n") + "\n";
}

function readTiktokenModel(path) {
  return fs.readFileSync(path, "utf8");
}

module.exports = { o200kTiktokenModel, readTiktokenModel };
