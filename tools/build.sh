#!/usr/bin/env bash
# Configures and builds everything into build/ (Release, Ninja). Uses ccache
# when the machine has it (paths relative to the clone, so clones share hits).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${K3_JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j "$jobs"
