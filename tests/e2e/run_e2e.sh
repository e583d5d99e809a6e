#!/usr/bin/env bash
# usage: run_e2e.sh BIN_DIR SOURCE_DIR
# The README's first command, end to end: deploy/run-local.sh starts the three
# daemons on a fresh tiny model, then real clients talk to the gateway: the
# official openai npm client (chat stream/non-stream, tools, completions,
# errors; constrained replies checked by ajv, with thinking too), Python
# grpcio on the gRPC API, curl on SSE, and k3ctl complete.
# Finally SIGTERM stops everything and nothing is left behind.
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3e2e.XXXXXX")"
runner=""
cleanup() {
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=tests/lib/local_stack.sh
source "$src/tests/lib/local_stack.sh"
start_local_stack "$bin" "$src" "$work"
fail=0

echo "== curl (SSE)"
bash "$src/tests/e2e/sse_curl.sh" "$http" || fail=1

echo "== python grpcio"
/usr/bin/python3 "$src/tests/e2e/grpc_client.py" "$grpc" || fail=1

echo "== openai npm client"
if command -v npm >/dev/null 2>&1; then
  (cd "$src/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error) && \
    node "$src/tests/e2e/openai_client.mjs" "$http" || fail=1
  echo "== constrained decoding (ajv)"
  node "$src/tests/e2e/schema_replies.mjs" "$http" || fail=1
  echo "== thinking + json_schema: a free think channel, then valid JSON (ajv)"
  node "$src/tests/e2e/thinking_schema.mjs" "$http" || fail=1
else
  echo "npm is not installed: the openai client check needs node + npm"
  fail=1
fi

echo "== k3ctl complete (gRPC, streamed)"
# Thinking off: the reply is all content (the random model writes no markup).
out=$("$bin/k3ctl" complete --gateway "$grpc" --no-thinking --max-tokens 8 --temperature 0 \
  "Hello!" 2>"$work/k3ctl.err") || {
  cat "$work/k3ctl.err"
  fail=1
}
if [ -z "$out" ]; then echo "FAIL k3ctl complete printed nothing"; fail=1; else
  echo "PASS k3ctl complete streamed ${#out} bytes"; fi

echo "== stop"
kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
if [ "$rc" -ne 0 ]; then echo "run-local.sh exited $rc after SIGTERM"; fail=1; fi
if [ -e "$work/run" ]; then echo "runtime dir left behind"; fail=1; fi
for s in /dev/shm/k3serve-local-*; do
  [ -e "$s" ] || continue
  pid=${s##*-}
  if ! kill -0 "$pid" 2>/dev/null; then echo "segment $s left behind"; fail=1; fi
done
if [ "$fail" -ne 0 ]; then
  for f in "$work"/logs/*; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
fi
echo "e2e: all clients passed"
