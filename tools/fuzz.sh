#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time on a scratch copy of the committed corpus (the repo is not
# written). Usage: tools/fuzz.sh [SECONDS_PER_TARGET]  (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DK3_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
  -DCMAKE_C_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" --target fuzz_safetensors fuzz_config fuzz_openai_request fuzz_xtml_output \
  fuzz_tokenizer_files fuzz_manifest fuzz_schema_compiler
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in safetensors config openai_request xtml_output tokenizer_files manifest schema_compiler; do
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/"${t%%_*}"/* "$work/$t/"
  echo "fuzz_$t: ${secs}s"
  "$build/bin/fuzz_$t" -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/$t" 2>&1 | grep -E "^(stat::number_of_executed_units|stat::new_units_added|==[0-9]+==ERROR|SUMMARY)" || true
  if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* >/dev/null 2>&1; then
    echo "fuzz_$t found a failing input:"; ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null
    exit 1
  fi
done
echo "fuzz: no crashes"
