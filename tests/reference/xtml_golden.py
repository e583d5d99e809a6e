"""Renders every case of xtml_cases.py with the independent port (xtml_ref.py)
and with `k3ctl chat-render`, and compares the segments exactly; where the
port refuses, k3ctl must exit non-zero printing {"error": ...} naming what the
case lists. Usage: xtml_golden.py K3CTL"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xtml_ref  # noqa: E402
from xtml_cases import CASES  # noqa: E402


MARKUP = {"@open": "<|open|>", "@close": "<|close|>", "@sep": "<|sep|>",
          "@eom": "<|end_of_msg|>", "@image": xtml_ref.IMAGE}


def check_golden_json(failures):
    """tests/data/chat/golden.json (the C++ unit tests' cases) holds what the
    port renders, and its errors are the port's too (but those marked
    stricter_than_reference)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chat",
                        "golden.json")
    with open(path, encoding="utf-8") as f:
        golden = json.load(f)
    for c in golden["cases"]:
        dev = c.get("options", {}).get("developer_as_system", False)
        want = [[MARKUP[s], True] if s in MARKUP else [s, False] for s in c["expected"]]
        try:
            got = xtml_ref.render(c["request"], developer_as_system=dev)
        except xtml_ref.RenderError as e:
            got = f"error: {e}"
        if got != want:
            failures.append(f"golden.json {c['name']}: the port renders {got}")
    for c in golden["errors"]:
        try:
            xtml_ref.render(c["request"])
            refused = False
        except (xtml_ref.RenderError, TypeError, KeyError, AttributeError):
            refused = True
        if refused == bool(c.get("stricter_than_reference")):
            failures.append(f"golden.json error {c['name']}: the port "
                            f"{'refuses' if refused else 'renders'} it")


def main():
    k3ctl = sys.argv[1]
    failures = []
    check_golden_json(failures)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny")
        subprocess.run([k3ctl, "mkmodel", "--out", model], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        names = set()
        for case in CASES:
            name = case["name"]
            assert name not in names, name
            names.add(name)
            dev = case.get("developer_as_system", False)
            try:
                want = xtml_ref.render(case["request"], developer_as_system=dev)
            except xtml_ref.RenderError:
                want = None
            assert (want is None) == ("error" in case), f"{name}: the case's error mark is wrong"
            cmd = [k3ctl, "chat-render", "--model", model] + (["--developer-as-system"] if dev else [])
            got = subprocess.run(cmd, input=json.dumps(case["request"]), capture_output=True,
                                 text=True)
            lines = got.stdout.strip().splitlines()
            out = json.loads(lines[-1]) if lines else None
            if want is None:
                ok = (got.returncode != 0 and isinstance(out, dict) and
                      all(s in out.get("error", "") for s in case["error"]))
                if not ok:
                    failures.append(f"{name}: expected an error naming {case['error']}, got "
                                    f"rc={got.returncode} {got.stdout.strip()}")
            elif got.returncode != 0 or out != want:
                failures.append(f"{name}:\n  port:  {json.dumps(want, ensure_ascii=False)}\n"
                                f"  k3ctl: rc={got.returncode} {got.stdout.strip()}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(CASES) - len(failures)}/{len(CASES)} cases agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
