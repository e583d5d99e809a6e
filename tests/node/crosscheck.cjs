// Cross-checks `k3ctl tokenize` against the real tiktoken on the corpus
// (tests/data/tokenizer/corpus.json): every id must match.
//   (a) js-tiktoken's o200k_base ranks under the o200k pattern (references:
//       @dqbd/tiktoken, the Rust core in WASM, and js-tiktoken itself) and
//       under Kimi's pattern (@dqbd/tiktoken: it runs Kimi's Rust-syntax
//       pattern as written, `&&` intersections included);
//   (b) the mkmodel vocabulary under Kimi's pattern (@dqbd/tiktoken);
//   (c) long text (kimi_chunks.cjs: base64, minified code, CJK, runs of
//       spaces, every isspace code point, the 400,000 piece boundary) under
//       Kimi's pattern, the reference being Kimi's chunking rule written in JS
//       then @dqbd/tiktoken on each chunk, with the o200k ranks as a bare ranks
//       file and with the mkmodel model directory; and under o200k's pattern,
//       which is not chunked, text whole.
// Also: invalid UTF-8 and lone surrogates are refused line by line, and
// `k3ctl detokenize` inverts tokenize on the whole corpus.
//
// usage: node crosscheck.cjs --k3ctl build/bin/k3ctl --corpus FILE [--model DIR]
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");
const { Tiktoken } = require("@dqbd/tiktoken/lite");
const { Tiktoken: JsTiktoken } = require("js-tiktoken/lite");
const patterns = require("./patterns.cjs");
const { kimiChunks, isSpace, longInputs } = require("./kimi_chunks.cjs");
const { o200kTiktokenModel } = require("./ranks.cjs");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const k3ctl = arg("k3ctl");
const corpus = JSON.parse(fs.readFileSync(arg("corpus"), "utf8"));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "k3-tokenizer-crosscheck-"));
let failures = 0;

function check(ok, what) {
  if (!ok) {
    failures++;
    console.log(`FAIL ${what}`);
  }
}

function run(args, input) {
  const r = spawnSync(k3ctl, args, { input, maxBuffer: 1 << 30 });
  if (r.error) throw r.error;
  return { code: r.status, out: r.stdout.toString("utf8"), err: r.stderr.toString("utf8") };
}

// k3ctl tokenize on every string; one array of ids per string.
function k3Tokenize(vocab, pattern, texts = corpus) {
  const input = texts.map((s) => JSON.stringify(s)).join("\n") + "\n";
  const r = run(["tokenize", "--vocab", vocab, "--pattern", pattern], input);
  if (r.code !== 0) throw new Error(`k3ctl tokenize failed (${r.code}): ${r.err}`);
  const lines = r.out.split("\n").filter((l) => l.length > 0);
  if (lines.length !== texts.length) {
    throw new Error(`k3ctl printed ${lines.length} lines for ${texts.length} strings`);
  }
  return lines.map((l) => JSON.parse(l));
}

function excerpt(s) {
  const e = JSON.stringify(s);
  return e.length > 70 ? e.slice(0, 67) + "..." : e;
}

// Compares k3's ids with a reference's, string by string (those `only` accepts).
function compare(label, ours, reference, only = () => true, texts = corpus, names = null) {
  let matched = 0;
  let tokens = 0;
  let compared = 0;
  for (let i = 0; i < texts.length; ++i) {
    if (!only(texts[i])) continue;
    compared++;
    const want = Array.from(reference(texts[i]));
    const got = ours[i];
    tokens += want.length;
    let at = 0;
    while (at < want.length && at < got.length && want[at] === got[at]) ++at;
    if (at === want.length && at === got.length) {
      matched++;
    } else {
      const what = names ? names[i] : excerpt(texts[i]);
      check(false, `${label}: string ${i} ${what}: first difference at id ${at}: ` +
                   `k3 ${JSON.stringify(got.slice(at, at + 5))} vs ` +
                   `${JSON.stringify(want.slice(at, at + 5))}`);
    }
  }
  console.log(`${label}: ${matched}/${compared} strings match (${tokens} ids)`);
}

for (const s of corpus) {
  if (typeof s !== "string" || /[\uD800-\uDFFF]/u.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ""))) {
    throw new Error(`corpus entries must be strings without lone surrogates: ${excerpt(s)}`);
  }
}
console.log(`corpus: ${corpus.length} strings, ` +
            `${corpus.reduce((n, s) => n + Buffer.byteLength(s, "utf8"), 0)} bytes`);

// (a) o200k_base ranks.
const o200kFile = path.join(tmp, "o200k", "tiktoken.model");
fs.mkdirSync(path.dirname(o200kFile));
const o200kText = o200kTiktokenModel();
fs.writeFileSync(o200kFile, o200kText);
const jsRanks = require("js-tiktoken/ranks/o200k_base");
const jsEnc = new JsTiktoken(jsRanks.default || jsRanks);
for (const pattern of ["o200k", "kimi"]) {
  const wasm = new Tiktoken(o200kText, {}, patterns[pattern]);
  const ours = k3Tokenize(o200kFile, pattern);
  compare(`o200k_base ranks, ${pattern} pattern vs @dqbd/tiktoken`, ours,
          (s) => wasm.encode_ordinary(s));
  if (pattern === "o200k") {
    // js-tiktoken's pure-JS merge loop is quadratic: a minute on the 18 KB
    // piece of the long Han string. The WASM core checks the long inputs.
    compare(`o200k_base ranks, o200k pattern vs js-tiktoken (strings under 1000 chars)`, ours,
            (s) => jsEnc.encode(s, [], []), (s) => s.length < 1000);
  }
  wasm.free();
}

// (b) the mkmodel vocabulary.
let modelDir = arg("model");
if (!modelDir) {
  modelDir = path.join(tmp, "tiny");
  const r = run(["mkmodel", "--preset", "tiny", "--out", modelDir], "");
  if (r.code !== 0) throw new Error(`k3ctl mkmodel failed: ${r.err}`);
}
const tinyFile = path.join(modelDir, "tiktoken.model");
const tinyText = fs.readFileSync(tinyFile, "utf8");
{
  const wasm = new Tiktoken(tinyText, {}, patterns.kimi);
  const ours = k3Tokenize(tinyFile, "kimi");
  compare("mkmodel ranks, kimi pattern vs @dqbd/tiktoken", ours, (s) => wasm.encode_ordinary(s));
  wasm.free();

  // detokenize inverts tokenize (model directory: special tokens loaded too).
  const r = run(["detokenize", "--vocab", modelDir], ours.map((ids) => JSON.stringify(ids)).join("\n") + "\n");
  check(r.code === 0, `k3ctl detokenize exit code ${r.code}: ${r.err}`);
  const back = r.out.split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
  let same = 0;
  for (let i = 0; i < corpus.length; ++i) {
    if (back[i] === corpus[i]) same++;
    else check(false, `detokenize(tokenize(string ${i})) differs: ${excerpt(back[i])}`);
  }
  console.log(`detokenize round trip: ${same}/${corpus.length} strings`);
}

// (c) Long text and Kimi's chunking.
{
  // The JS rule's whitespace is Python's str.isspace() (when python3 is here).
  const py = spawnSync("python3", ["-c",
    "import sys; print(','.join(str(c) for c in range(0x110000) if chr(c).isspace()))"]);
  if (py.status === 0) {
    const pySpaces = py.stdout.toString().trim().split(",").map(Number);
    const jsSpaces = [];
    for (let c = 0; c < 0x110000; ++c) {
      if ((c < 0xd800 || c > 0xdfff) && isSpace(String.fromCodePoint(c))) jsSpaces.push(c);
    }
    check(JSON.stringify(pySpaces) === JSON.stringify(jsSpaces),
          `the chunk rule's whitespace differs from Python's isspace(): ${pySpaces} vs ${jsSpaces}`);
    console.log(`chunk rule whitespace: ${jsSpaces.length} code points, as Python's isspace()`);
  } else {
    console.log("chunk rule whitespace: python3 not found, not compared with isspace()");
  }

  const inputs = longInputs();
  const names = inputs.map(([name]) => name);
  const texts = inputs.map(([, text]) => text);
  const chunked = (wasm) => (s) => kimiChunks(s).flatMap((c) => Array.from(wasm.encode_ordinary(c)));
  // The o200k ranks as a bare ranks file (no tokenizer_config.json beside it).
  const bareDir = path.join(tmp, "bare");
  fs.mkdirSync(bareDir);
  const bareFile = path.join(bareDir, "o200k_base.tiktoken");
  fs.writeFileSync(bareFile, o200kText);
  for (const [label, vocab, ranksText] of [["o200k_base ranks (bare ranks file)", bareFile, o200kText],
                                           ["mkmodel ranks (model directory)", modelDir, tinyText]]) {
    const wasm = new Tiktoken(ranksText, {}, patterns.kimi);
    const t0 = Date.now();
    compare(`${label}, kimi pattern, long text vs Kimi's chunks + @dqbd/tiktoken`,
            k3Tokenize(vocab, "kimi", texts), chunked(wasm), () => true, texts, names);
    console.log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    wasm.free();
  }
  // o200k's pattern encodes text whole (tiktoken's encode): no chunks.
  {
    const whole = ["base64 of 120 KB", "25001 letters", "60,000 spaces between words"];
    const only = inputs.filter(([name]) => whole.includes(name));
    const wasm = new Tiktoken(o200kText, {}, patterns.o200k);
    compare("o200k_base ranks, o200k pattern, long text whole vs @dqbd/tiktoken",
            k3Tokenize(bareFile, "o200k", only.map(([, t]) => t)), (s) => wasm.encode_ordinary(s),
            () => true, only.map(([, t]) => t), only.map(([n]) => n));
    wasm.free();
  }
}

// Refusals at the API boundary: one error object per bad line, exit code 1.
{
  const lines = [
    Buffer.from(JSON.stringify("fine") + "\n"),
    Buffer.from('"\\ud800 lone high surrogate"\n'),
    Buffer.from('"lone low \\udc00"\n'),
    Buffer.concat([Buffer.from('"bad byte '), Buffer.from([0xff]), Buffer.from('"\n')]),
    Buffer.concat([Buffer.from('"overlong '), Buffer.from([0xc0, 0xaf]), Buffer.from('"\n')]),
    Buffer.concat([Buffer.from('"encoded surrogate '), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"\n')]),
    Buffer.from("42\n"),
    Buffer.from(JSON.stringify("still fine") + "\n"),
  ];
  const r = run(["tokenize", "--vocab", tinyFile], Buffer.concat(lines));
  const out = r.out.split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
  check(r.code === 1, `tokenize with bad lines: exit code ${r.code}, want 1`);
  check(out.length === lines.length, `tokenize with bad lines: ${out.length} output lines`);
  check(Array.isArray(out[0]) && Array.isArray(out[7]), "good lines around bad ones are encoded");
  for (let i = 1; i <= 6; ++i) {
    check(out[i] && typeof out[i].error === "string" && out[i].error.includes(`line ${i + 1}`),
          `bad line ${i + 1} gives an error object naming it: ${JSON.stringify(out[i])}`);
  }
  console.log(`refusals: ${JSON.stringify(out.slice(1, 7).map((o) => o.error))}`);
}

fs.rmSync(tmp, { recursive: true, force: true });
if (failures > 0) {
  console.log(`${failures} failure(s)`);
  process.exit(1);
}
console.log("all ids match");
