#!/usr/bin/env bash
# Configures and builds into build/ (Release, Ninja). Uses ccache when the
# machine has it (paths relative to the clone, so clones share hits).
#   tools/build.sh             everything: the programs, the tests, the tools
#   tools/build.sh --programs  only expertd, engined, gateway and k3ctl (the
#                              quickstart: no test suites or test tools; 190
#                              of the 322 compile steps)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${K3_JOBS:-$(nproc)}"
tests=ON
targets=()
case "${1:-}" in
  "") ;;
  --programs) tests=OFF targets=(--target expertd engined gateway k3ctl) ;;
  *) echo "build.sh: unknown argument '$1' (--programs or nothing)" >&2; exit 2 ;;
esac
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# K3_BUILD_TESTS every time: a tree configured by --programs gets its tests
# back from a plain tools/build.sh (tools/test.sh).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DK3_BUILD_TESTS="$tests" "${launcher[@]}" >/dev/null
cmake --build build -j "$jobs" "${targets[@]}"
