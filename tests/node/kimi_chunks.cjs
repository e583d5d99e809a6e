// Kimi's chunking of long text, written here from the rule alone (the
// reference is tokenization_kimi.py's encode: 400,000-character pieces, then
// _split_whitespaces_or_nonwhitespaces with 25,000), for the cross-check: the
// reference ids of a text are tiktoken's ids of each chunk, concatenated.
// Also the long inputs the cross-check encodes (deterministic).
"use strict";

const PIECE = 400000; // TIKTOKEN_MAX_ENCODE_CHARS, in code points (Python str)
const MAX_RUN = 25000; // MAX_NO_WHITESPACES_CHARS

// Python's str.isspace(), code point by code point.
const SPACES = new Set([0x20, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);
for (let c = 0x09; c <= 0x0d; ++c) SPACES.add(c);
for (let c = 0x1c; c <= 0x1f; ++c) SPACES.add(c);
for (let c = 0x2000; c <= 0x200a; ++c) SPACES.add(c);

function isSpace(ch) {
  return SPACES.has(ch.codePointAt(0));
}

// The chunks of `text`, as strings. Works on code points (Array.from), not
// UTF-16 units: an emoji is one character, as in Python.
function kimiChunks(text) {
  const chars = Array.from(text);
  const chunks = [];
  for (let p = 0; p < chars.length; p += PIECE) {
    const piece = chars.slice(p, p + PIECE);
    let start = 0;
    let run = 0;
    let runIsSpace = isSpace(piece[0]);
    for (let i = 0; i < piece.length; ++i) {
      const space = isSpace(piece[i]);
      if (space !== runIsSpace) {
        runIsSpace = space;
        run = 1;
      } else if (++run > MAX_RUN) {
        chunks.push(piece.slice(start, i).join(""));
        start = i;
        run = 1;
      }
    }
    chunks.push(piece.slice(start).join(""));
  }
  return chunks;
}

// xorshift32: the same inputs on every run.
function rng(seed) {
  let x = seed >>> 0;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

function randomBase64(bytes, next) {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; ++i) b[i] = next(256);
  return b.toString("base64");
}

// Long texts: [name, text]. Each is there for a cut (or for the absence of
// one) that changes the ids if the rule is applied wrong.
function longInputs() {
  const next = rng(24);
  const out = [];
  const add = (name, text) => out.push([name, text]);
  const b64 = randomBase64(120 * 1024, next);
  add("base64 of 120 KB", b64);
  add("base64 of 120 KB, MIME lines of 76", b64.replace(/.{76}/g, "$&\r\n"));
  {
    // Minified script: whitespace only now and then.
    const tokens = ["function", "return", "var", "this", ".prototype", "(", ")", "{", "}", ";",
      ",", "=", "===", "!==", "&&", "||", "?", ":", "+", "-", "<", ">", "[", "]", "!0", "null",
      "'k3'", "=>", ".length", ".push(", "void(0)"];
    let code = "";
    while (code.length < 100000) {
      if (next(3) === 0) {
        for (let n = 1 + next(6); n > 0; --n) code += String.fromCharCode(97 + next(26));
        if (next(4) === 0) code += String(next(1000));
      } else {
        code += tokens[next(tokens.length)];
      }
      if (next(20000) === 0) code += " ";
    }
    add("minified code", code);
  }
  {
    const sentences = ["人工智能正在改变世界，", "大型语言模型可以写代码、翻译和回答问题。",
      "深度学习模型在二〇一七年提出。", "這是一個繁體中文的句子；", "価格は千五百円です。",
      "专家混合模型把计算分给很多专家，每个词元只激活其中几个。"];
    let para = "";
    while (para.length < 60000) para += sentences[next(sentences.length)];
    add("a long CJK paragraph", para);
  }
  // One Han piece of 25,010 characters, cut inside a "中国" (one o200k token).
  add("a run of 25,010 Han characters", "中国人".repeat(8337).slice(0, 25010));
  add("60,000 spaces", " ".repeat(60000));
  add("60,000 spaces between words", "x" + " ".repeat(60000) + "y");
  add("30,000 newlines", "\n".repeat(30000));
  add("CRLF run cut between CR and LF", " " + "\r\n".repeat(13000));
  for (const n of [25000, 25001, 50001]) add(`${n} letters`, "ing".repeat(Math.ceil(n / 3)).slice(0, n));
  add("25,001 spaces", " ".repeat(25001));
  // 25,001 code points, 50,001 UTF-16 units: the cut splits an emoji and its
  // skin tone (one token of the tiny vocabulary's BPE).
  add("x and 12,500 emoji with skin tone (code points, not UTF-16 units)", "x" + "👍🏻".repeat(12500));
  add("12,501 emoji in UTF-16 is 25,002 units", "😀".repeat(12501));
  {
    // Every isspace code point and some look-alikes, between letters: a space
    // keeps both runs short; anything else makes one run of 30,003, cut at
    // 25,000, inside an "ing".
    const filler = "ing1"; // "ing" is one token of both vocabularies
    const lookAlikes = [0x200b, 0xfeff, 0x180e, 0x2060, 0x200d, 0x3164, 0x2800, 0x1b, 0x08];
    for (const cp of [...SPACES, ...lookAlikes]) {
      const ch = String.fromCodePoint(cp);
      add(`U+${cp.toString(16).toUpperCase().padStart(4, "0")} between runs`,
          "xy" + filler.repeat(5000) + ch + filler.repeat(2500));
    }
  }
  {
    // Runs crossing the 400,000 piece boundary: the count starts again there.
    // Words of several scripts (code points, not UTF-16 units, are counted).
    const chars = [];
    const vocab = ["the", "quick", "brown", "fox", "jumps", "über", "的", "1999", "😀", "x=1;"];
    while (chars.length < 400000) {
      chars.push(...Array.from(vocab[next(vocab.length)]), next(5) === 0 ? "\n" : " ");
    }
    const prefix = (n) => chars.slice(0, n).join("");
    // A run of "ing1" from 379,999: the piece cut at 400,000 and the next cut
    // at 425,000 fall inside an "ing" (a cut counted on from 379,999 would not).
    add("a run crossing the piece boundary", prefix(379998) + " " + "ing1".repeat(12500) + " end");
    add("spaces crossing the piece boundary", prefix(390000) + "x" + " ".repeat(40000) + "end");
    add("mixed text over 400,000 characters", chars.join("") + "and the end");
  }
  return out;
}

module.exports = { kimiChunks, isSpace, longInputs, PIECE, MAX_RUN };
