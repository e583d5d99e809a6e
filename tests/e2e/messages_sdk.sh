#!/usr/bin/env bash
# usage: messages_sdk.sh BIN_DIR SOURCE_DIR
# The Anthropic Messages API judged by its own client: deploy/run-local.sh on
# a fresh tiny model with an API key file, then @anthropic-ai/sdk
# (anthropic_sdk.mjs): messages.create, messages.stream, a tool_use /
# tool_result round trip, thinking on and off, countTokens, the same seed as
# chat completions, a wrong key.
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3msgs.XXXXXX")"
runner=""
cleanup() {
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

key="sk-k3-messages-e2e-$RANDOM$RANDOM$RANDOM"
(umask 077 && echo "$key" >"$work/keys")
# shellcheck source=tests/lib/local_stack.sh
source "$src/tests/lib/local_stack.sh"
start_local_stack "$bin" "$src" "$work" --api-keys "$work/keys"

command -v npm >/dev/null 2>&1 || { echo "npm is not installed: the SDK check needs node + npm"; exit 1; }
(cd "$src/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
fail=0
K3_API_KEY="$key" node "$src/tests/e2e/anthropic_sdk.mjs" "$http" || fail=1

kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
if [ "$rc" -ne 0 ]; then echo "run-local.sh exited $rc after SIGTERM"; fail=1; fi
if [ "$fail" -ne 0 ]; then
  for f in "$work"/logs/*; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
fi
echo "e2e_messages_sdk: passed"
