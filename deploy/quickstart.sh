#!/usr/bin/env bash
# From a fresh clone to a result: installs the Debian packages, builds, writes
# the built-in synthetic model (build/models/tiny) and generates from it with
# engined (experts streamed from the shards in-process).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
tools/build.sh
model=build/models/tiny
if [ ! -f "$model/config.json" ]; then
  build/bin/k3ctl mkmodel --preset tiny --out "$model" --seed 1
fi
build/bin/k3ctl inspect --model "$model"
# OpenMP threads sleep at barriers instead of spinning: on a desktop that is
# busy with other work, spinning threads fight for the cores (a dedicated
# server may prefer OMP_WAIT_POLICY=active).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
build/bin/engined generate --model "$model" --chat "Hello! Who are you?" --max-tokens 48 --log-level warn
