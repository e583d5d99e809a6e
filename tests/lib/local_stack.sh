# shellcheck shell=bash
# Sourced by the shell tests that need the three real daemons: makes the tiny
# synthetic model under WORK and starts deploy/run-local.sh on it (ports
# chosen by the kernel), waiting for its READY line (at most 3 minutes).
#
#   start_local_stack BIN_DIR SRC_DIR WORK [RUN_LOCAL_FLAG...]
#
# (more run-local.sh flags, e.g. --api-keys FILE, after WORK)
# Sets: runner (run-local.sh's pid; the caller's EXIT trap stops it), ready
# (the READY line), http and grpc (the gateway's addresses). Exits the test
# with run-local.sh's stderr when the daemons do not come up.
start_local_stack() {
  local bin=$1 src=$2 work=$3
  shift 3
  "$bin/k3ctl" mkmodel --preset tiny --out "$work/model" >/dev/null 2>&1
  export OMP_WAIT_POLICY=passive
  "$src/deploy/run-local.sh" --model "$work/model" --http-port 0 --grpc-port 0 \
    --runtime-dir "$work/run" --log-dir "$work/logs" --bin-dir "$bin" --cache-gb 0.1 "$@" \
    >"$work/ready.out" 2>"$work/run-local.err" &
  runner=$!
  for _ in $(seq 1800); do
    grep -q '^READY ' "$work/ready.out" 2>/dev/null && break
    kill -0 "$runner" 2>/dev/null || { cat "$work/run-local.err"; echo "run-local.sh exited early"; exit 1; }
    sleep 0.1
  done
  ready=$(grep '^READY ' "$work/ready.out") || { cat "$work/run-local.err"; echo "no READY line"; exit 1; }
  echo "$ready"
  # shellcheck disable=SC2034  # read by the sourcing test
  http=$(echo "$ready" | sed -n 's/.*http=\([^ ]*\).*/\1/p')
  # shellcheck disable=SC2034
  grpc=$(echo "$ready" | sed -n 's/.*grpc=\([^ ]*\).*/\1/p')
}
