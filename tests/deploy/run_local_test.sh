#!/usr/bin/env bash
# deploy/run-local.sh's options, as a newcomer passes them (issue 27):
#   --host, --http-port=0 (both forms), the web page's address on stdout;
#   --expertd-arg / --engined-arg / --gateway-arg, repeatable, as `--x-arg V`
#   and `--x-arg=V` (here each daemon gets --log-format json that way: its log
#   must then be JSON lines, one of them with the request's id);
#   no "is back" for an expertd that was never down;
#   bad options refused before anything starts.
#
#   tests/deploy/run_local_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3runlocal.XXXXXX")"
runner=""
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then
    kill -TERM "$runner"
    wait "$runner" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
check() { # check DESCRIPTION COMMAND...: runs COMMAND, reports
  local what="$1"
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

# --- Refusals, before anything starts (exit 2 for usage, 1 for a bad value).
rc=0
"$src/deploy/run-local.sh" --model "$work/none" --engined-arg >/dev/null 2>"$work/err" || rc=$?
check "a pass-through option without its value is refused" [ "$rc" -eq 2 ]
check "... and named" grep -q -- "--engined-arg needs a value" "$work/err"
rc=0
"$src/deploy/run-local.sh" --model "$work/none" --gatway-arg=x >/dev/null 2>"$work/err" || rc=$?
check "a misspelt option is refused by name" grep -q -- "unknown argument '--gatway-arg'" "$work/err"
"$bin/k3ctl" mkmodel --preset tiny --out "$work/model" >/dev/null 2>&1
rc=0
"$src/deploy/run-local.sh" --model "$work/model" --bin-dir "$bin" --host 'no such host' \
  >/dev/null 2>"$work/err" || rc=$?
check "a bad --host is refused" [ "$rc" -eq 1 ]
check "... and named" grep -q -- "--host 'no such host'" "$work/err"

# --- A run with every pass-through form.
export OMP_WAIT_POLICY=passive
"$src/deploy/run-local.sh" --model="$work/model" --host 127.0.0.1 --http-port=0 --grpc-port 0 \
  --runtime-dir "$work/run" --log-dir="$work/logs" --bin-dir "$bin" --cache-gb=0.1 \
  --expertd-arg=--log-format=json \
  --engined-arg --log-format --engined-arg json --engined-arg=--max-context=4096 \
  --gateway-arg --log-format=json --gateway-arg=--max-tokens-limit --gateway-arg 64 \
  >"$work/out" 2>"$work/err" &
runner=$!
for _ in $(seq 1800); do
  grep -q '^WEB ' "$work/out" 2>/dev/null && break
  kill -0 "$runner" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q '^WEB ' "$work/out"; then
  cat "$work/out" "$work/err"
  echo "FAIL: run-local.sh did not print the web page's address"
  exit 1
fi
cat "$work/out"
http=$(sed -n 's/^READY http=\([^ ]*\).*/\1/p' "$work/out")
web=$(sed -n 's/^WEB //p' "$work/out")
check "the web page's address is the gateway's HTTP listener" [ "$web" = "http://$http/" ]
check "the web page answers there" bash -c "curl -fsS '$web' | grep -qi '<html'"
check "the listen address is --host's" bash -c "[[ '$http' == 127.0.0.1:* ]]"
check "engined got both forms (run-local's log of its command)" \
  grep -q -- "starting engined: .* --log-format json --max-context=4096" "$work/err"
check "the gateway got its arguments after run-local's own" \
  grep -q -- "starting gateway: .*--ready-file .* --log-format=json --max-tokens-limit 64" "$work/err"

# A request the gateway refuses by its passed limit, one it serves.
code=$(curl -s -o "$work/refused.json" -w '%{http_code}' "http://$http/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 65}')
check "--gateway-arg --max-tokens-limit 64 took effect (max_tokens 65: 400)" [ "$code" = 400 ]
curl -fsS -o /dev/null "http://$http/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}'

# Each daemon logs JSON lines (its --log-format json arrived); the gateway's
# request line carries the request id.
for d in expertd engined gateway; do
  check "$d's log is JSON lines with time zone, level, daemon, message" \
    /usr/bin/python3 - "$work/logs/$d.log" "$d" <<'PY'
import json, re, sys
path, daemon = sys.argv[1], sys.argv[2]
lines = [l for l in open(path, encoding="utf-8") if l.strip()]
assert lines, "empty log"
for l in lines:
    j = json.loads(l)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", j["time"]), j
    assert j["daemon"] == daemon, j
    assert j["level"] in ("trace", "debug", "info", "warning", "error", "critical"), j
    assert isinstance(j["message"], str), j
PY
done
check "the gateway's request lines carry request_id" \
  /usr/bin/python3 -c "
import json, sys
ids = [json.loads(l).get('request_id') for l in open('$work/logs/gateway.log') if l.strip()]
sys.exit(0 if any(ids) else 1)"
check "no 'is back' for an expertd that was never down" \
  bash -c "! grep -q 'is back' '$work/logs/gateway.log'"

kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
check "run-local.sh stops cleanly on SIGTERM" [ "$rc" -eq 0 ]
exit "$fail"
