#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time on a scratch copy of the committed corpus (the repo is not
# written). Usage: tools/fuzz.sh [SECONDS_PER_TARGET]  (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
if [ "$secs" = "-h" ] || [ "$secs" = "--help" ]; then
  echo "Usage: tools/fuzz.sh [SECONDS_PER_TARGET]"
  echo "  SECONDS_PER_TARGET          libFuzzer time per target, seconds (default: 60)"
  exit 0
fi
case "$secs" in
  '' | *[!0-9]* | 0) echo "fuzz.sh: SECONDS_PER_TARGET must be a positive number of seconds, not '$secs'" >&2; exit 2 ;;
esac
# "1m05s": the ETA format of shared/base/progress.h.
hms() { if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi; }
build="build-fuzz"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DK3_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
  -DCMAKE_C_FLAGS="-fsanitize=address,undefined" >/dev/null
targets="safetensors config openai_request responses_request xtml_output tokenizer_files manifest topology daemon_config
  checkpoint_store shm_ring schema_compiler generation_config remote_request messages_request"
# shellcheck disable=SC2046
cmake --build "$build" -j "${K3_JOBS:-$(nproc)}" --target $(for t in $targets; do echo "fuzz_$t"; done)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets_n=$(echo "$targets" | wc -w)
start=$SECONDS
i=0
for t in $targets; do
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/"${t%%_*}"/* "$work/$t/"
  # Each target runs for a fixed time: the ETA is the targets left times that.
  echo "fuzz: [$((i + 1))/$targets_n] fuzz_$t for ${secs}s, elapsed $(hms $((SECONDS - start))), ETA $(hms $(((targets_n - i) * secs)))"
  i=$((i + 1))
  "$build/bin/fuzz_$t" -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/$t" 2>&1 | grep -E "^(stat::number_of_executed_units|stat::new_units_added|==[0-9]+==ERROR|SUMMARY)" || true
  # (Not `ls A* B* C*`: it fails when any one pattern matches nothing, which
  # hid a crash file behind the missing leak and timeout files.)
  found=$(find "$work" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \) -print)
  if [ -n "$found" ]; then
    echo "fuzz_$t found a failing input:"; echo "$found"
    exit 1
  fi
done
echo "fuzz: no crashes"
