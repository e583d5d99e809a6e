#!/usr/bin/env bash
# The whole test suite: dependencies, build, every CTest suite (GoogleTest and
# the numpy reference), then the fuzzers for a bounded time.
# Usage: tools/test.sh   (K3_FUZZ_SECONDS=N to change the fuzz time, 0 to skip;
# K3_SOAK_SECONDS=N the soak test's, ctest -L soak, 150 s here)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
deploy/install-deps.sh
tools/build.sh
echo "build: $(( $(date +%s) - start ))s"
export K3_SOAK_SECONDS="${K3_SOAK_SECONDS:-150}"
ctest --test-dir build --output-on-failure -j "${K3_TEST_JOBS:-2}"
fuzz_secs="${K3_FUZZ_SECONDS:-33}"  # x 13 targets: about 7 minutes, as 36 x 12 was
if [ "$fuzz_secs" -gt 0 ]; then
  tools/fuzz.sh "$fuzz_secs"
fi
echo "test.sh: all green in $(( $(date +%s) - start ))s"
