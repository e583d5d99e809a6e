#!/usr/bin/env bash
# usage: run_browser_test.sh BIN_DIR SOURCE_DIR SCREENSHOT_DIR
# The web chat page in headless Chromium (Debian's chromium) driven by
# playwright-core (pinned in tests/web/package-lock.json, installed here with
# npm ci as tests/e2e does): deploy/run-local.sh starts the three daemons on a
# fresh tiny model, a second gateway on the same engined runs with --api-keys,
# then browser_test.mjs walks the page and saves screenshots of each state
# into SCREENSHOT_DIR. Everything is stopped at the end.
set -euo pipefail
bin=$1
src=$2
shots=$3
work="$(mktemp -d "${TMPDIR:-/tmp}/k3web.XXXXXX")"
runner=""
keyed=""
cleanup() {
  if [ -n "$keyed" ] && kill -0 "$keyed" 2>/dev/null; then kill -TERM "$keyed"; wait "$keyed" || true; fi
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

chromium=""
for c in /usr/lib/chromium/chromium /usr/bin/chromium; do [ -x "$c" ] && chromium=$c && break; done
[ -n "$chromium" ] || { echo "chromium is not installed (deploy/install-deps.sh installs it)"; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "npm is not installed: the browser test needs node + npm"; exit 1; }
(cd "$src/tests/web" && npm ci --no-audit --no-fund --loglevel=error)

# shellcheck source=tests/lib/local_stack.sh
source "$src/tests/lib/local_stack.sh"
start_local_stack "$bin" "$src" "$work"

# The keyed gateway: same engined and topology, its own listeners.
key="k3-web-test-$RANDOM$RANDOM"
echo "$key" >"$work/keys"
chmod 600 "$work/keys"
"$bin/gateway" --model "$work/model" --engined "unix:$work/run/engined.sock" \
  --topology "$work/run/topology.json" --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
  --api-keys "$work/keys" --ready-file "$work/keyed.ready" >"$work/logs/gateway-keyed.log" 2>&1 &
keyed=$!
for _ in $(seq 300); do
  [ -s "$work/keyed.ready" ] && break
  kill -0 "$keyed" 2>/dev/null || { cat "$work/logs/gateway-keyed.log"; echo "keyed gateway died"; exit 1; }
  sleep 0.1
done
keyed_http=$(sed -n 's/.*http=\([^ ]*\).*/\1/p' "$work/keyed.ready")
[ -n "$keyed_http" ] || { echo "the keyed gateway wrote no address"; exit 1; }

rm -rf "$shots"
mkdir -p "$shots"
rc=0
K3_HTTP="$http" K3_HTTP_KEYED="$keyed_http" K3_API_KEY="$key" \
  K3_ENGINED="unix:$work/run/engined.sock" K3_SCREENSHOTS="$shots" K3_CHROMIUM="$chromium" \
  timeout 240 node "$src/tests/web/browser_test.mjs" || rc=$?
if [ "$rc" -ne 0 ]; then
  for f in "$work"/logs/*; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
fi
echo "screenshots: $shots"
