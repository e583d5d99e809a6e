#!/usr/bin/env bash
# usage: sdk_test.sh BIN_DIR SOURCE_DIR NAME SCRIPT [--api-key]
# One API judged by its own npm client: deploy/run-local.sh starts the three
# daemons on a fresh tiny model (tests/lib/local_stack.sh), with an API key
# file under --api-key (passed to SCRIPT as K3_API_KEY), then
# `node SCRIPT HOST:PORT` runs its checks against the gateway (e2e_messages_sdk:
# anthropic_sdk.mjs; e2e_responses_sdk: responses_sdk.mjs). SIGTERM stops it
# all; on a failure the daemons' log tails are printed.
set -euo pipefail
bin=$1
src=$2
name=$3
script=$4
with_key=0
[ "${5:-}" = "--api-key" ] && with_key=1
work="$(mktemp -d "${TMPDIR:-/tmp}/k3sdk.XXXXXX")"
runner=""
cleanup() {
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: $name needs node + npm"
  exit 1
fi
(cd "$src/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)

stack_flags=()
key=""
if [ "$with_key" -eq 1 ]; then
  key="sk-k3-sdk-e2e-$RANDOM$RANDOM$RANDOM"
  (umask 077 && echo "$key" >"$work/keys")
  stack_flags=(--api-keys "$work/keys")
fi
# shellcheck source=tests/lib/local_stack.sh
source "$src/tests/lib/local_stack.sh"
start_local_stack "$bin" "$src" "$work" "${stack_flags[@]}"

fail=0
K3_API_KEY="$key" node "$src/tests/e2e/$script" "$http" || fail=1

kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
if [ "$rc" -ne 0 ]; then echo "run-local.sh exited $rc after SIGTERM"; fail=1; fi
if [ "$fail" -ne 0 ]; then
  for f in "$work"/logs/*; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
fi
echo "$name: passed"
