#!/usr/bin/env python3
"""Writes tests/data/tokenizer/chunk_golden.json: where Kimi's encoder cuts long
text, computed by a Python port of the rule (tokenization_kimi.py's encode:
pieces of 400,000 characters, then runs of whitespace or non-whitespace longer
than 25,000 cut, whitespace being str.isspace()), written here from the rule.
chunking_test.cpp builds each text from its runs and compares our cuts. Run it
again after editing; the JSON file is what the test reads (committed).

Each case: {"name", "parts": [[text, times], ...] (the text is each part's text
repeated, in order), "chunks": [lengths in code points]}.
"""
import json
import os
import random

PIECE = 400_000
MAX_RUN = 25_000


def split_runs(s, limit):
    """Yields the slices of s: a run of whitespace or non-whitespace longer
    than `limit` is cut before its (limit+1)-th character, and every `limit`
    after that."""
    run = 0
    run_is_space = s[0].isspace() if s else False
    start = 0
    for i, ch in enumerate(s):
        space = ch.isspace()
        if space != run_is_space:
            run_is_space = space
            run = 1
        else:
            run += 1
            if run > limit:
                yield s[start:i]
                start = i
                run = 1
    yield s[start:]


def chunks(text):
    return [c for i in range(0, len(text), PIECE) for c in split_runs(text[i:i + PIECE], MAX_RUN)]


CASES = []


def add(name, parts):
    text = "".join(unit * n for unit, n in parts)
    got = chunks(text)
    assert "".join(got) == text and all(got), name
    CASES.append({"name": name, "parts": [[unit, n] for unit, n in parts],
                  "chunks": [len(c) for c in got]})


add("25,000 letters", [("a", 25_000)])
add("25,001 letters", [("a", 25_001)])
add("50,001 letters", [("a", 50_001)])
add("60,000 spaces", [(" ", 60_000)])
add("25,001 emoji", [("\U0001F600", 25_001)])
add("12,501 emoji (25,002 UTF-16 units)", [("\U0001F600", 12_501)])
add("25,001 Han", [("中", 25_001)])
add("spaces then 25,001 letters", [("x", 1), (" ", 25_000), ("y", 25_001)])
add("a cut, a space, a cut", [("a", 25_001), (" ", 1), ("b", 25_001)])
add("CRLF run", [(" ", 1), ("\r\n", 13_000)])
add("run across the piece boundary", [("aaa ", 94_999), ("x", 50_004)])
add("spaces across the piece boundary", [("aaa ", 97_500), (" ", 40_000), ("a", 3)])
add("words over 400,000", [("ab 的 😀\n", 60_000)])
add("800,001 letters", [("a", 800_001)])
for cp in list(range(0x110000)):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    if chr(cp).isspace() or cp in (0x200B, 0xFEFF, 0x180E, 0x2060, 0x1B, 0x08, 0x3164):
        add(f"U+{cp:04X} between letters", [("a", 20_000), (chr(cp), 1), ("a", 10_000)])
rng = random.Random(24)
spaces = [" ", "\n", "\t", "\x1c", "\xa0", "\u3000", "\u2028", "\x85"]
texts = ["a", "Z", "7", "+", "\xe9", "中", "\u200b", "\U0001F600"]
for k in range(6):
    runs, total = [], 0
    while total < 1_000_000:
        pool = rng.choice((spaces, texts))
        n = rng.choice((rng.randint(1, 20), rng.randint(24_990, 25_010), rng.randint(1, 60_000)))
        # A run of one class, as a few sub-runs of different characters.
        while n > 0:
            m = min(n, rng.randint(1, 30_000))
            runs.append((rng.choice(pool), m))
            n -= m
            total += m
    add(f"random runs {k}", runs)

assert sum(c["name"].startswith("U+") for c in CASES) == 29 + 7
path = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tokenizer", "chunk_golden.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump({"about": "Kimi's chunks by a Python port of the rule; regenerate with "
               "tests/shared/tokenizer/make_chunk_golden.py", "cases": CASES}, f, separators=(",", ":"))
    f.write("\n")
print(f"{len(CASES)} cases -> {os.path.normpath(path)} ({os.path.getsize(path)} bytes)")
