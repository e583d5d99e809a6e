#!/usr/bin/env python3
"""Every program's --help follows the convention of shared/base/cli_help.h.

usage: help_test.py BIN_DIR SOURCE_DIR

Walks `--help` of k3ctl and each of its subcommands (nested ones too),
expertd, engined (and its subcommands), gateway and deploy/quickstart.sh, and
fails on an option line that does not say what happens when the option is
absent ("(default: X)" or "default: X" in the text, "(required)", "(flag)"),
or on a numeric option whose name and description name no unit. Also checks
that quickstart.sh --help does nothing but print, and that docs/programs.md names
every k3ctl subcommand as `k3ctl NAME`.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"\(required\)|\(flag\)|\(default[: ]|\bdefault: ")
NUMERIC = re.compile(r"^(INT|UINT|FLOAT|NUMBER|DOUBLE)\b")
# Words that name what a number counts or measures.
UNIT = re.compile(
    r"(seconds?|\bms\b|milliseconds|minutes|hours|days|\bs\b|-s\b|_s\b|bytes|\bKiB\b|\bMiB\b|"
    r"\bGiB\b|\bkB\b|\bKB\b|\bMB\b|\bGB\b|-gb\b|-kb\b|-mb\b|-mib\b|GB/s|tokens?|requests?|threads?|"
    r"connections?|fields|layers?|experts?|bits|cores?|files?|lines?|iterations?|steps?|entries|"
    r"slots?|reads?|samples?|repeats?|runs?|clients?|sessions?|prompts?|positions?|rows?|columns?|"
    r"shards?|drives?|messages?|calls?|times|%|percent|fraction|ratio|factor|seed|index|"
    r"count|number of|temperature|probability|size|dims?|dimension|heads?|vocab|rank|top-k|"
    r"groups?|taps|words?|chars?|characters|pages?|hugepages?|queue|in flight|port|exit code|per)",
    re.IGNORECASE)

NAME_WIDTH = 30
failures = []


def run_help(argv):
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, K3_API_KEY="not-shown-in-help"))
    if r.returncode != 0:
        failures.append(f"{' '.join(argv)} --help exited {r.returncode}: {r.stderr.strip()}")
    if "not-shown-in-help" in r.stdout:
        failures.append(f"{' '.join(argv)} --help prints $K3_API_KEY's value")
    return r.stdout


def sections(text):
    """{section name: [(name column, description)]} of a CLI11-style help."""
    out, current, entries = {}, None, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[A-Z][A-Za-z ]*:\s*$", line):
            current = line.strip()[:-1]
            entries = out.setdefault(current, [])
            continue
        if current is None or not line.strip():
            continue
        if re.match(r"^  \S", line):
            # CLI11: the name in a 30-column field; a longer name gets the
            # description on the next line, indented by the field's width.
            wrapped = i + 1 < len(lines) and lines[i + 1].startswith(" " * NAME_WIDTH)
            if wrapped or len(line) <= NAME_WIDTH:
                entries.append([line.strip(), ""])
            else:
                entries.append([line[:NAME_WIDTH].strip(), line[NAME_WIDTH:].strip()])
        elif entries:  # the description of a long name
            entries[-1][1] = (entries[-1][1] + " " + line.strip()).strip()
    return out


def check_options(program, text):
    s = sections(text)
    for section in ("Options", "Positionals"):
        for name, desc in s.get(section, []):
            where = f"{program}: {name}"
            if not MARKER.search(desc):
                failures.append(f"{where}: no (default: X) / (required) / (flag) in '{desc}'")
            words = name.split()
            if len(words) > 1 and NUMERIC.match(words[1]) and not UNIT.search(words[0] + " " + desc):
                failures.append(f"{where}: a number without a unit in '{desc}'")
    return [name for name, _ in s.get("Subcommands", [])]


def walk(argv, checked):
    text = run_help(argv)
    subs = check_options(" ".join(os.path.basename(argv[0]) if i == 0 else a
                                  for i, a in enumerate(argv)), text)
    checked.append(" ".join(argv[1:]) or os.path.basename(argv[0]))
    for sub in subs:
        walk(argv + [sub], checked)
    return subs


def check_quickstart(src):
    # A copy of the script in an empty tree: --help must print and touch nothing.
    with tempfile.TemporaryDirectory() as tree:
        os.makedirs(os.path.join(tree, "deploy"))
        script = os.path.join(tree, "deploy", "quickstart.sh")
        shutil.copy(os.path.join(src, "deploy", "quickstart.sh"), script)
        r = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            failures.append(f"quickstart.sh --help exited {r.returncode}: {r.stderr.strip()}")
        left = sorted(os.listdir(tree))
        if left != ["deploy"] or os.listdir(os.path.join(tree, "deploy")) != ["quickstart.sh"]:
            failures.append(f"quickstart.sh --help did more than print: the tree now has {left}")
        if "Usage" not in r.stdout:
            failures.append(f"quickstart.sh --help prints no Usage: {r.stdout!r}")
        check_options("quickstart.sh", r.stdout)
        r = subprocess.run(["bash", script, "--frobnicate"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 2 or "--frobnicate" not in r.stderr:
            failures.append(f"quickstart.sh took an unknown option (exit {r.returncode})")


def main():
    bin_dir, src = sys.argv[1], sys.argv[2]
    checked = []
    k3ctl_subs = walk([os.path.join(bin_dir, "k3ctl")], checked)
    for daemon in ("expertd", "engined", "gateway"):
        walk([os.path.join(bin_dir, daemon)], checked)
    check_quickstart(src)
    readme = open(os.path.join(src, "docs", "programs.md")).read()
    for sub in k3ctl_subs:
        if f"k3ctl {sub}" not in readme:
            failures.append(f"docs/programs.md does not list `k3ctl {sub}`")
    print(f"checked --help of {len(checked)} programs and subcommands: {', '.join(checked)}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
