#!/usr/bin/env bash
# usage: bench_test.sh BIN_DIR SOURCE_DIR
# tools/realspeed/bench.sh on the tiny model (milliseconds per token: the
# figures are not the point, their lines are): every JSON line parses and
# carries its fields, the edited prompt is computed again only from its last
# snapshot (fewer tokens than the first read, more than none), the usage
# errors are refused with exit 2.
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3benchtest.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
command -v node >/dev/null 2>&1 || fail "node is not installed"

rc=0
"$src/tools/realspeed/bench.sh" --bin-dir "$bin" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" -eq 2 ] && grep -qF -- "--model DIR is required" "$work/err" || fail "no --model: exit $rc, $(cat "$work/err")"
rc=0
node "$src/tools/realspeed/bench.mjs" --http 127.0.0.1:1 --prompt-tokens 10 >/dev/null 2>"$work/err" || rc=$?
[ "$rc" -eq 2 ] && grep -qF -- "--prompt-tokens 10 must be" "$work/err" || fail "--prompt-tokens 10: exit $rc, $(cat "$work/err")"
echo "PASS usage errors"

"$bin/k3ctl" mkmodel --preset tiny --out "$work/model" >/dev/null 2>&1
# 600 tokens: two 256-token snapshots, the edit past the second.
"$src/tools/realspeed/bench.sh" --model "$work/model" --bin-dir "$bin" --drive-mbps 1000 \
  --prompt-tokens 600 --seed 7 >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "bench.sh failed"; }
cat "$work/out"
/usr/bin/python3 - "$work/out" <<'PY' || fail "the JSON lines"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {l["metric"]: l for l in lines}
assert [l["metric"] for l in lines] == ["prompt", "stream_gap_max", "first_read", "edited_read", "setup"], lines
assert abs(by["prompt"]["tokens"] - 600) <= 30, by["prompt"]
g = by["stream_gap_max"]
assert g["unit"] == "s" and 0 <= g["value"] < 10 and g["comments"] >= 1 and g["prefill_reports"] >= 1, g
f, e = by["first_read"], by["edited_read"]
assert f["prompt_tokens"] == by["prompt"]["tokens"] and f["computed_tokens"] == f["prompt_tokens"] - f["cached_tokens"], f
assert f["ttft_s"] > 0 and e["ttft_s"] > 0, (f, e)
# The edit is at the end: only what follows the deepest snapshot is computed.
assert 0 < e["computed_tokens"] < f["computed_tokens"], (f, e)
assert e["cached_tokens"] >= 512 and e["restored_tokens"] > 0, e
assert e["computed_fraction"] == round(e["computed_tokens"] / f["computed_tokens"], 4), e
assert by["setup"]["drive_mbps"] == 1000 and "slots of" in by["setup"]["expertd_cache"], by["setup"]
PY
echo "PASS the bench's lines on the tiny model"
