#!/usr/bin/env bash
# usage: responses_sdk.sh BIN_DIR SOURCE_DIR
# POST /v1/responses judged by OpenAI's own clients (issue 28): deploy/run-local.sh
# starts the three daemons on a fresh tiny model (tests/lib/local_stack.sh),
# then responses_sdk.mjs runs the openai npm client (responses.create, the
# responses.stream helper, a function-tool round trip) and @openai/agents (an
# agent with one function tool) against the gateway. SIGTERM stops it all.
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3resp.XXXXXX")"
runner=""
cleanup() {
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: the Responses SDK checks need node + npm"
  exit 1
fi
(cd "$src/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)

# shellcheck source=tests/lib/local_stack.sh
source "$src/tests/lib/local_stack.sh"
start_local_stack "$bin" "$src" "$work"

fail=0
node "$src/tests/e2e/responses_sdk.mjs" "$http" || fail=1

kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
if [ "$rc" -ne 0 ]; then echo "run-local.sh exited $rc after SIGTERM"; fail=1; fi
if [ "$fail" -ne 0 ]; then
  for f in "$work"/logs/*; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
fi
echo "e2e_responses_sdk: passed"
