#!/usr/bin/env bash
# Runs the three k3serve daemons on this host, in the foreground:
#
#   deploy/run-local.sh --model DIR [--host ADDR] [--http-port P] [--grpc-port P]
#       [--runtime-dir DIR] [--bin-dir DIR] [--cache-gb G] [--sessions N]
#       [--checkpoint-mb MB] [--checkpoint-dir DIR] [--snapshot-tokens N]
#       [--api-keys FILE] [--log-dir DIR] [--timeout S] [--drive-mbps N]
#       [--expertd-arg ARG]... [--engined-arg ARG]... [--gateway-arg ARG]...
#
# Every option takes its value as the next argument or after "=":
# `--http-port 8080` or `--http-port=8080`.
#
# --host ADDR: the address the gateway's HTTP and gRPC APIs listen on (default
# 127.0.0.1; 0.0.0.0 or :: for every interface). The gateway refuses
# plaintext beyond loopback unless told: add --gateway-arg --allow-plaintext
# (and an API key file, --api-keys FILE).
#
# --expertd-arg, --engined-arg, --gateway-arg ARG pass ARG to that daemon,
# after the options this script gives it (so they win); repeat for each word:
#   --engined-arg=--max-context=32768 --engined-arg --threads --engined-arg 16
#   --gateway-arg=--max-queue=16 --expertd-arg=--log-format=json
# Each daemon's --help lists what it takes.
#
# Saved states: --checkpoint-mb MB in RAM (default 256), then files in
# --checkpoint-dir DIR (default: the runtime directory's checkpoints/, removed
# at stop; a DIR given is kept, so a restart resumes from its files), and a
# prefill snapshot every --snapshot-tokens N prompt tokens (default 256; 0 =
# off): a later prompt sharing a prefix resumes from the deepest one.
#
# --drive-mbps N runs at the real model's speed on a small model: expertd
# reads the experts with O_DIRECT (the run stops when the model's filesystem
# refuses it: reads would come from the page cache) capped at N MB/s (its
# --read-limit-mbps), from a cache of 0.5 GB unless --cache-gb is given: 28
# experts of 17.55 MB (the real model's and k3-slice's size), fewer than the
# 32 other experts a k3-slice reads between two uses of one, so each decoded
# token reads its 48 experts (842 MB) from the drive and a prompt's 32-token
# chunk all 96 (1.7 GB). With `k3ctl mkmodel --preset k3-slice`, N = 300 gave
# about 3 s per token and 8 s per 32-token prompt chunk on a 2-core VM (the
# e2e_realspeed test runs so).
#
# Starts expertd (its own shared-memory segment), then `engined serve` on that
# segment, then the gateway, waits until GET /health answers 200 and prints one
# line on stdout:  READY http=HOST:PORT grpc=HOST:PORT  (everything else goes to
# stderr), then the web page's address:  WEB http://HOST:PORT/  Ports default
# to 8080 and 50051; 0 picks free ones (read them from the READY line). On SIGINT/SIGTERM, or when a daemon dies, it stops the
# gateway, engined and expertd in that order (SIGTERM, SIGKILL after 10 s),
# removes the runtime directory and exits: 0 after a signal, 1 when a daemon
# died or did not come up. The daemons' logs stay in the log directory.
# From another script send SIGTERM: a background job of a non-interactive shell
# starts with SIGINT ignored, and bash cannot trap a signal ignored at entry.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model=""
host=127.0.0.1
http_port=8080
grpc_port=50051
runtime_dir=""
bin_dir="$repo/build/bin"
cache_gb=1
cache_given=0
drive_mbps=""
sessions=""
checkpoint_mb=256
checkpoint_dir=""
snapshot_tokens=256
api_keys=""
log_dir=""
start_timeout=180
stop_grace=10
expertd_extra=()
engined_extra=()
gateway_extra=()

log() { echo "run-local: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}
# Prints the comment block at the top of this file; exits with $1 (default 2).
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

while [ $# -gt 0 ]; do
  case "$1" in -h | --help) usage 0 ;; esac
  # --option=VALUE is --option VALUE (VALUE may hold more "=": --x-arg=--y=1).
  if [[ "$1" == --*=* ]]; then
    set -- "${1%%=*}" "${1#*=}" "${@:2}"
  fi
  [ $# -ge 2 ] || { log "$1 needs a value"; usage; }
  case "$1" in
    --model) model="$2" ;;
    --host) host="$2" ;;
    --expertd-arg) expertd_extra+=("$2") ;;
    --engined-arg) engined_extra+=("$2") ;;
    --gateway-arg) gateway_extra+=("$2") ;;
    --http-port) http_port="$2" ;;
    --grpc-port) grpc_port="$2" ;;
    --runtime-dir) runtime_dir="$2" ;;
    --bin-dir) bin_dir="$2" ;;
    --cache-gb) cache_gb="$2" cache_given=1 ;;
    --drive-mbps) drive_mbps="$2" ;;
    --sessions) sessions="$2" ;;
    --checkpoint-mb) checkpoint_mb="$2" ;;
    --checkpoint-dir) checkpoint_dir="$2" ;;
    --snapshot-tokens) snapshot_tokens="$2" ;;
    --api-keys) api_keys="$2" ;;
    --log-dir) log_dir="$2" ;;
    --timeout) start_timeout="$2" ;;
    *) log "unknown argument '$1'"; usage ;;
  esac
  shift 2
done

# --- Check everything before starting anything.
[ -n "$model" ] || { log "--model DIR is required"; usage; }
[ -f "$model/config.json" ] || die "$model/config.json not found: is --model a k3serve model directory? (k3ctl mkmodel --preset tiny --out DIR writes one)"
model="$(cd "$model" && pwd)"
for p in "$http_port" "$grpc_port" "$start_timeout"; do
  [[ "$p" =~ ^[0-9]+$ ]] || die "'$p' is not a number (ports, --timeout)"
done
# A host name or an IPv4 address as is; an IPv6 address in brackets.
[[ "$host" =~ ^[A-Za-z0-9._-]+$|^\[?[0-9A-Fa-f:.]+\]?$ ]] ||
  die "--host '$host' is not a host name or an IP address"
if [[ "$host" == *:* && "$host" != \[* ]]; then
  host="[$host]"
fi
if [ -n "$drive_mbps" ]; then
  if ! [[ "$drive_mbps" =~ ^[0-9]+(\.[0-9]+)?$ && "$drive_mbps" =~ [1-9] ]]; then
    die "--drive-mbps '$drive_mbps' must be a positive number of MB/s"
  fi
  [ "$cache_given" -eq 1 ] || cache_gb=0.5
fi
[[ "$snapshot_tokens" =~ ^[0-9]+$ ]] || die "--snapshot-tokens '$snapshot_tokens' is not a number (0 = off)"
if [ -n "$checkpoint_dir" ]; then
  mkdir -p "$checkpoint_dir" || die "--checkpoint-dir $checkpoint_dir cannot be created"
  [ -w "$checkpoint_dir" ] || die "--checkpoint-dir $checkpoint_dir is not writable"
  checkpoint_dir="$(cd "$checkpoint_dir" && pwd)"
fi
for b in expertd engined gateway; do
  [ -x "$bin_dir/$b" ] || die "$bin_dir/$b not found: build first (tools/build.sh) or pass --bin-dir"
done
bin_dir="$(cd "$bin_dir" && pwd)"
command -v curl >/dev/null || die "curl is needed (apt-get install curl)"
if [ -n "$api_keys" ]; then
  [ -r "$api_keys" ] || die "--api-keys $api_keys is not readable"
  api_keys="$(cd "$(dirname "$api_keys")" && pwd)/$(basename "$api_keys")"
fi

# The runtime directory (sockets, topology, ready file, checkpoints) is removed
# at the end: a fresh one by default; a given one is removed only if this run
# created it, otherwise only the files this run put there.
own_runtime_dir=0
if [ -z "$runtime_dir" ]; then
  runtime_dir="$(mktemp -d "${XDG_RUNTIME_DIR:-/tmp}/k3serve-local.XXXXXX")"
  own_runtime_dir=1
elif [ ! -e "$runtime_dir" ]; then
  mkdir -p "$runtime_dir"
  own_runtime_dir=1
fi
runtime_dir="$(cd "$runtime_dir" && pwd)"
# Logs outlive the run: next to the runtime directory unless --log-dir.
if [ -z "$log_dir" ]; then
  log_dir="$(dirname "$runtime_dir")/k3serve-logs-$$"
fi
mkdir -p "$log_dir"
log_dir="$(cd "$log_dir" && pwd)"

expertd_sock="$runtime_dir/expertd.sock"
engined_sock="$runtime_dir/engined.sock"
ready_file="$runtime_dir/gateway.ready"
topology="$runtime_dir/topology.json"
# Checkpoint files: the one given (kept), else the runtime dir's (removed).
own_checkpoint_dir=""
if [ -z "$checkpoint_dir" ]; then
  checkpoint_dir="$runtime_dir/checkpoints"
  own_checkpoint_dir="$checkpoint_dir"
fi
segment="k3serve-local-$$"
# sockaddr_un holds 107 bytes of path.
if [ "${#engined_sock}" -ge 100 ]; then
  [ "$own_runtime_dir" -eq 0 ] || rmdir "$runtime_dir"
  die "runtime dir $runtime_dir is too long for a unix socket path; pass a shorter --runtime-dir"
fi

# A socket left by a crashed run in a given runtime dir would pass for the new
# daemon's; one that still accepts connections belongs to a live run.
for f in "$expertd_sock" "$engined_sock"; do
  if [ -e "$f" ]; then
    if curl -s -o /dev/null --max-time 2 --unix-socket "$f" http://local/ 2>/dev/null ||
      [ $? -ne 7 ]; then
      die "$f is in use: another run on --runtime-dir $runtime_dir?"
    fi
    rm -f "$f"
  fi
done
rm -f "$ready_file"

# On a machine busy with other work, OpenMP threads that spin at barriers fight
# for the cores (see README); a dedicated server may set OMP_WAIT_POLICY=active.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"

names=()     # daemons started, in start order
pids=()      # their pids, same order
stopped=0

# Starts daemon $1 (the rest: its command line) in its own session, so that a
# Ctrl-C on the terminal reaches this script only and the stop order holds.
# (A background child of a script is no process-group leader, so setsid execs
# the daemon without forking: $! is the daemon's pid.)
start_daemon() {
  local name="$1"
  shift
  log "starting $name: $*"
  setsid "$@" </dev/null >>"$log_dir/$name.log" 2>&1 &
  names+=("$name")
  pids+=("$!")
}

# Stops one daemon: SIGTERM, SIGKILL after $stop_grace seconds, then reaps it.
stop_daemon() {
  local name="$1" pid="$2" timer rc
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  (
    sleep "$stop_grace"
    kill -KILL "$pid" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  timer=$!
  rc=0
  wait "$pid" 2>/dev/null || rc=$?
  if kill -0 "$timer" 2>/dev/null; then
    # KILL: the timer inherited stop_all's ignored SIGTERM.
    kill -KILL "$timer" 2>/dev/null || true
  elif [ "$rc" -eq 137 ]; then
    log "$name did not stop within ${stop_grace} s: killed"
  fi
  wait "$timer" 2>/dev/null || true
}

# Stops the daemons in reverse start order (gateway, engined, expertd) and
# removes what this run created. Idempotent: runs from the signal trap, on
# errors and at exit.
stop_all() {
  [ "$stopped" -eq 0 ] || return 0
  stopped=1
  trap '' INT TERM
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    stop_daemon "${names[$i]}" "${pids[$i]}"
  done
  # expertd removes its segment on a clean exit, not after SIGKILL.
  rm -f "/dev/shm/$segment"
  if [ "$own_runtime_dir" -eq 1 ]; then
    rm -rf "$runtime_dir"
  elif [ "${#pids[@]}" -gt 0 ]; then
    rm -rf "$expertd_sock" "$engined_sock" "$ready_file" "$topology" ${own_checkpoint_dir:+"$own_checkpoint_dir"}
  fi
  log "stopped; logs in $log_dir"
}

# Prints the last lines of daemon $1's log to stderr.
show_log_tail() {
  local f="$log_dir/$1.log"
  if [ -s "$f" ]; then
    log "last lines of $f:"
    tail -n 40 "$f" | sed 's/^/    /' >&2
  fi
}

# Returns 1 (after reporting) when a started daemon is no longer running.
check_alive() {
  local i rc
  for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      rc=0
      wait "${pids[$i]}" 2>/dev/null || rc=$?
      log "${names[$i]} exited (status $rc) $1"
      show_log_tail "${names[$i]}"
      return 1
    fi
  done
  return 0
}

on_signal() {
  log "signal received: stopping"
  stop_all
  exit 0
}

trap stop_all EXIT
trap on_signal INT TERM

deadline=$((SECONDS + start_timeout))
# Waits until command "$2..." succeeds; $1 names what is awaited. Fails (exit
# 1, through the EXIT trap) when a daemon dies or the start-up time runs out.
wait_until() {
  local what="$1"
  shift
  until "$@"; do
    check_alive "while waiting for $what" || exit 1
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${start_timeout} s waiting for $what"
      show_log_tail "${names[${#names[@]} - 1]}"
      exit 1
    fi
    sleep 0.2
  done
}

log "runtime dir $runtime_dir; logs in $log_dir"

# --- expertd: the experts through /dev/shm/$segment.
expertd_args=(--model "$model" --listen "unix:$expertd_sock" --segment "$segment"
  --cache-gb "$cache_gb")
[ -z "$drive_mbps" ] || expertd_args+=(--read-limit-mbps "$drive_mbps")
expertd_args+=(${expertd_extra[@]+"${expertd_extra[@]}"})
expertd_log_start=$(($(stat -c %s "$log_dir/expertd.log" 2>/dev/null || echo 0) + 1))
start_daemon expertd "$bin_dir/expertd" "${expertd_args[@]}"
wait_until "expertd's socket $expertd_sock" test -S "$expertd_sock"
# O_DIRECT is expertd's default; it falls back to buffered reads (the page
# cache) where the filesystem refuses it, and says so before it listens (in
# this run's part of its log: the log is appended to).
if [ -n "$drive_mbps" ] &&
  tail -c "+$expertd_log_start" "$log_dir/expertd.log" | grep -q "O_DIRECT refused"; then
  die "--drive-mbps needs O_DIRECT reads, and the filesystem of $model refuses them ($(stat -f -c %T "$model")): put the model on a drive"
fi

# --- engined on that segment.
engined_args=(serve --model "$model" --listen "unix:$engined_sock" --expertd "$segment"
  --checkpoint-mb "$checkpoint_mb" --checkpoint-dir "$checkpoint_dir"
  --snapshot-tokens "$snapshot_tokens")
[ -z "$sessions" ] || engined_args+=(--sessions "$sessions")
engined_args+=(${engined_extra[@]+"${engined_extra[@]}"})
mkdir -p "$checkpoint_dir"
start_daemon engined "$bin_dir/engined" "${engined_args[@]}"
wait_until "engined's socket $engined_sock" test -S "$engined_sock"

# --- gateway: the one expertd in its topology, both listeners on --host.
printf '{"expertd": [{"name": "local0", "address": "unix:%s"}]}\n' "$expertd_sock" >"$topology"
gateway_args=(--model "$model" --engined "unix:$engined_sock" --topology "$topology"
  --http-listen "$host:$http_port" --grpc-listen "$host:$grpc_port"
  --ready-file "$ready_file")
[ -z "$api_keys" ] || gateway_args+=(--api-keys "$api_keys")
gateway_args+=(${gateway_extra[@]+"${gateway_extra[@]}"})
start_daemon gateway "$bin_dir/gateway" "${gateway_args[@]}"
wait_until "the gateway's ready file $ready_file" test -s "$ready_file"

# The ready file: one line "http=HOST:PORT grpc=HOST:PORT" (written atomically).
http_addr=""
grpc_addr=""
read -r -a fields <"$ready_file"
for f in "${fields[@]}"; do
  case "$f" in
    http=*) http_addr="${f#http=}" ;;
    grpc=*) grpc_addr="${f#grpc=}" ;;
  esac
done
if [ -z "$http_addr" ] || [ -z "$grpc_addr" ]; then
  die "unexpected ready file content: '$(cat "$ready_file")' (expected http=HOST:PORT grpc=HOST:PORT)"
fi

# The page's address as a browser on this host reaches it: a wildcard listen
# address is reached on loopback.
web_addr="$http_addr"
case "$web_addr" in
  0.0.0.0:*) web_addr="127.0.0.1:${web_addr#0.0.0.0:}" ;;
  "[::]:"*) web_addr="[::1]:${web_addr#\[::\]:}" ;;
esac
health_ok() { curl -fsS -o /dev/null --max-time 5 "http://$web_addr/health" 2>/dev/null; }
wait_until "GET http://$web_addr/health to answer 200" health_ok

echo "READY http=$http_addr grpc=$grpc_addr"
echo "WEB http://$web_addr/"
log "serving: the web page at http://$web_addr/, the OpenAI API at http://$http_addr/v1, gRPC at $grpc_addr; Ctrl-C stops"

# --- Foreground until a signal (the trap exits 0) or a daemon's death (exit 1).
while :; do
  died=""
  rc=0
  wait -n -p died "${pids[@]}" || rc=$?
  [ -n "$died" ] || continue # interrupted without a death
  for i in "${!pids[@]}"; do
    [ "${pids[$i]}" != "$died" ] || name="${names[$i]}"
  done
  log "$name exited unexpectedly (status $rc): stopping the others"
  show_log_tail "$name"
  exit 1
done
