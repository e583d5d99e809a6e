#!/usr/bin/env bash
# The service at the real model's speed, measured (issue 25's closing figures):
#
#   tools/realspeed/bench.sh --model DIR [--drive-mbps N] [--prompt-tokens N]
#       [--bin-dir DIR] [--seed N] [-- RUN_LOCAL_FLAG ...]
#
# Starts deploy/run-local.sh --drive-mbps N (default 300) on the model (a
# k3-slice: `k3ctl mkmodel --preset k3-slice --out DIR`), then
# tools/realspeed/bench.mjs reads a chat prompt of about --prompt-tokens
# tokens (default 2000) twice, streamed: as it is, then with its last words
# changed. JSON lines on stdout (see bench.mjs): `prompt`, `stream_gap_max`
# (the longest time without a byte from the gateway during the first read),
# `first_read` and `edited_read` (prompt tokens computed, cached, restored,
# time to first token; the edited read's as fractions of the first's), then
# `setup` (the flags, expertd's reads). Flags after `--` go to run-local.sh
# as they are. Progress and logs go to stderr; the daemons are stopped at the
# end. Exit 0 when every figure was measured, 1 otherwise, 2 on a usage error.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
model=""
mbps=300
prompt_tokens=2000
bin_dir="$repo/build/bin"
seed=""
extra=()

log() { echo "bench: $*" >&2; }
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage 0 ;;
    --) shift; extra=("$@"); break ;;
  esac
  [ $# -ge 2 ] || { log "$1 needs a value"; usage; }
  case "$1" in
    --model) model="$2" ;;
    --drive-mbps) mbps="$2" ;;
    --prompt-tokens) prompt_tokens="$2" ;;
    --bin-dir) bin_dir="$2" ;;
    --seed) seed="$2" ;;
    *) log "unknown argument '$1'"; usage ;;
  esac
  shift 2
done
[ -n "$model" ] || { log "--model DIR is required"; usage; }
[[ "$prompt_tokens" =~ ^[0-9]+$ ]] || { log "--prompt-tokens '$prompt_tokens' is not a whole number"; usage; }
command -v node >/dev/null || { log "node is needed"; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/k3bench.XXXXXX")"
runner=""
cleanup() {
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
"$repo/deploy/run-local.sh" --model "$model" --http-port 0 --grpc-port 0 --runtime-dir "$work/run" \
  --log-dir "$work/logs" --bin-dir "$bin_dir" --drive-mbps "$mbps" ${extra[@]+"${extra[@]}"} \
  >"$work/ready.out" 2>"$work/run-local.err" &
runner=$!
log "starting the daemons (run-local.sh --drive-mbps $mbps ${extra[*]:-})"
until grep -q '^READY ' "$work/ready.out" 2>/dev/null; do
  kill -0 "$runner" 2>/dev/null || { cat "$work/run-local.err" >&2; log "run-local.sh exited"; exit 1; }
  sleep 0.2
done
http=$(sed -n 's/^READY .*http=\([^ ]*\).*/\1/p' "$work/ready.out")
log "$(cat "$work/ready.out"); measuring"

rc=0
node "$here/bench.mjs" --http "$http" --prompt-tokens "$prompt_tokens" ${seed:+--seed "$seed"} || rc=$?
slots=$(grep -oE '[0-9]+ slots of [0-9]+ bytes' "$work/logs/expertd.log" | head -n 1 || true)
node -e 'console.log(JSON.stringify({metric: "setup", drive_mbps: Number(process.argv[1]),
  expertd_cache: process.argv[2], run_local_extra: process.argv[3]}))' "$mbps" "$slots" "${extra[*]:-}"
exit "$rc"
