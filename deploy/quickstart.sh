#!/usr/bin/env bash
# From a fresh clone to a result: installs the Debian packages, builds, writes
# the built-in synthetic model (build/models/tiny) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
tools/build.sh
model=build/models/tiny
if [ ! -f "$model/config.json" ]; then
  build/bin/k3ctl mkmodel --preset tiny --out "$model" --seed 1
fi
build/bin/k3ctl inspect --model "$model"
# The forward pass arrives with the engine; until then, start the daemons on
# private sockets and ask each for its Health.
run=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$run"' EXIT
build/bin/expertd --model "$model" --listen "unix:$run/expertd.sock" --log-level warn &
build/bin/engined serve --model "$model" --listen "unix:$run/engined.sock" --log-level warn &
for svc in expertd engined; do
  for _ in $(seq 100); do
    build/bin/k3ctl health --address "unix:$run/$svc.sock" --service "$svc" 2>/dev/null && break
    sleep 0.1
  done
done
