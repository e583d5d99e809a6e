#!/usr/bin/env bash
# From a fresh clone to a streamed reply: installs the Debian packages the
# programs need, builds the four programs (expertd, engined, gateway, k3ctl;
# not the tests: tools/test.sh builds those), writes the built-in synthetic
# model (build/models/tiny), starts the three
# daemons with deploy/run-local.sh (expertd, engined, gateway), and chats
# through the gateway's API: the OpenAI HTTP API with curl (SSE chunks), then
# a streamed reply printed by `k3ctl complete` (gRPC).
#
#   deploy/quickstart.sh           ends after the replies (the daemons stop)
#   deploy/quickstart.sh --serve   keeps the service up until Ctrl-C; talk to it
#                                  with k3ctl chat or any OpenAI client
set -euo pipefail
usage() {
  cat <<'EOF'
Usage: deploy/quickstart.sh [OPTIONS]
From a fresh clone to a streamed reply: installs the Debian packages the
programs need, builds the four programs (not the tests), writes the synthetic
model build/models/tiny, starts the three daemons and sends two requests (curl
over SSE, then k3ctl complete over gRPC).

Options:
  -h,--help                   print this help and do nothing else (flag)
  --serve                     keep the service up until Ctrl-C after the replies (flag)

Environment:
  K3_HTTP_PORT                the OpenAI HTTP API's TCP port (default: 8080)
  K3_GRPC_PORT                the gRPC API's TCP port (default: 50051)
  OMP_WAIT_POLICY             OpenMP threads at barriers (default: passive)
EOF
}
serve=0
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --serve) serve=1 ;;
    *) echo "quickstart.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
deploy/install-deps.sh --programs
tools/build.sh --programs
model=build/models/tiny
if [ ! -f "$model/config.json" ]; then
  build/bin/k3ctl mkmodel --preset tiny --out "$model" --seed 1
fi
# OpenMP threads sleep at barriers instead of spinning: on a desktop that is
# busy with other work, spinning threads fight for the cores (a dedicated
# server may prefer OMP_WAIT_POLICY=active).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"

out="$(mktemp)"
http_port="${K3_HTTP_PORT:-8080}"
grpc_port="${K3_GRPC_PORT:-50051}"
deploy/run-local.sh --model "$model" --http-port "$http_port" --grpc-port "$grpc_port" \
  --cache-gb 0.2 >"$out" &
runner=$!
stop() {
  kill -TERM "$runner" 2>/dev/null || true
  wait "$runner" 2>/dev/null || true
  rm -f "$out"
}
trap stop EXIT
# run-local.sh prints READY, then the web page's address (WEB).
until grep -q '^WEB ' "$out"; do
  kill -0 "$runner" 2>/dev/null || { echo "quickstart: the service did not start" >&2; exit 1; }
  sleep 0.2
done
ready=$(grep '^READY ' "$out")
http=$(echo "$ready" | sed -n 's/.*http=\([^ ]*\).*/\1/p')
grpc=$(echo "$ready" | sed -n 's/.*grpc=\([^ ]*\).*/\1/p')
web=$(sed -n 's/^WEB //p' "$out")
echo "quickstart: $ready"

# The synthetic model's weights are random: its replies are random text.
echo "--- curl, OpenAI HTTP API (SSE):"
curl -sS -N "http://$http/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8, "stream": true}'
echo "--- k3ctl complete (gRPC, streamed; reasoning on stderr):"
build/bin/k3ctl complete --gateway "$grpc" --show-reasoning --max-tokens 48 "Hello! Who are you?"

if [ "$serve" -eq 1 ]; then
  echo "quickstart: serving; open $web in a browser, or chat with:"
  echo "  build/bin/k3ctl chat --gateway $grpc   (Ctrl-C stops)"
  wait "$runner"
fi
