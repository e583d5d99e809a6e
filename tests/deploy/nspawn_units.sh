#!/usr/bin/env bash
# The units of deploy/systemd under a real systemd: boots one in a container
# (systemd-nspawn over the host's own /usr with a volatile tmpfs root, so no
# image is needed), with the built programs in /usr/local/bin, a tiny model in
# /var/lib/k3serve/model and test configs in /etc/k3serve. Inside, a driver
# unit checks that
#   - k3serve.target brings up expertd@0, engined and the gateway (/health 200,
#     a chat completion 200) under the units' hardening;
#   - each daemon SIGKILLed is restarted by systemd (Restart=on-failure) and
#     the service answers again;
#   - `systemd-analyze security` of each unit (printed; with --max-exposure
#     each must be at most that);
#   - stopping the target stops all three cleanly (exit 0) and leaves no
#     segment in /run/k3serve/shm (the units' segment directory) or /dev/shm
#     and no socket in /run/k3serve.
#
#   tests/deploy/nspawn_units.sh BIN_DIR [--max-exposure X] [--drop-in FILE]
#
# --drop-in installs FILE for expertd@ and engined (e.g.
# deploy/systemd/unix-sockets-only.conf) before the boot.
#
# Exits 0 when all holds, 1 otherwise, 77 (skipped) when this host cannot boot
# a container (not root, no systemd-nspawn, or the boot fails: the reason is
# printed).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin_dir="$(cd "${1:?usage: nspawn_units.sh BIN_DIR [--max-exposure X]}" && pwd)"
shift
max_exposure=""
drop_in=""
while [ $# -gt 0 ]; do
  case "$1" in
    --max-exposure)
      max_exposure="$2"
      shift 2
      ;;
    --drop-in)
      drop_in="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
      shift 2
      ;;
    *)
      echo "unknown argument $1" >&2
      exit 2
      ;;
  esac
done

skip() {
  echo "SKIP: $*" >&2
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root to boot a container"
command -v systemd-nspawn >/dev/null || skip "no systemd-nspawn (Debian package systemd-container)"
[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd on this host"
for b in expertd engined gateway k3ctl; do
  [ -x "$bin_dir/$b" ] || {
    echo "FAIL: $bin_dir/$b is not an executable" >&2
    exit 1
  }
done

work="$(mktemp -d /tmp/k3nspawn.XXXXXX)"
trap 'rm -rf "$work"' EXIT
[ -z "${K3_NSPAWN_KEEP:-}" ] || trap 'echo "kept $work" >&2' EXIT
mkdir -p "$work/units/k3serve.target.wants" "$work/units/multi-user.target.wants" \
  "$work/etc" "$work/sysusers" "$work/results" "$work/test"
chmod 0755 "$work" "$work/results"

# The units as deploy/install-systemd.sh installs them (ExecStart under
# /usr/local/bin, which is where the programs are bound), enabled.
cp "$repo"/deploy/systemd/*.service "$repo"/deploy/systemd/*.target "$work/units/"
ln -s ../k3serve-expertd@.service "$work/units/k3serve.target.wants/k3serve-expertd@0.service"
ln -s ../k3serve.target "$work/units/multi-user.target.wants/k3serve.target"
ln -s ../k3test-driver.service "$work/units/multi-user.target.wants/k3test-driver.service"
if [ -n "$drop_in" ]; then
  for u in k3serve-expertd@ k3serve-engined; do
    mkdir -p "$work/units/$u.service.d"
    cp "$drop_in" "$work/units/$u.service.d/50-$(basename "$drop_in")"
  done
  echo "drop-in $(basename "$drop_in") for expertd@ and engined"
fi
# The root is empty at each boot: no first-boot wizard waiting at the console.
ln -s /dev/null "$work/units/systemd-firstboot.service"
cp "$repo/deploy/systemd/k3serve.sysusers.conf" "$work/sysusers/k3serve.conf"

# A tiny model, readable by the k3serve user.
"$bin_dir/k3ctl" mkmodel --preset tiny --out "$work/model" >/dev/null 2>&1
chmod -R a+rX "$work/model"

# Configs: the example ones, with a small cache, no extra shard directory and
# a free port (the container shares the host's network).
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$work/etc/expertd-0.json" <<EOF
{"model": "/var/lib/k3serve/model", "listen": "unix:/run/k3serve/expertd-0.sock",
 "segment": "k3serve-expertd-0", "segment_dir": "/run/k3serve/shm", "cache_gb": 0.05}
EOF
cat >"$work/etc/engined.json" <<EOF
{"model": "/var/lib/k3serve/model", "listen": "unix:/run/k3serve/engined.sock",
 "expertd": ["/run/k3serve/shm/k3serve-expertd-0"], "sessions": 2, "checkpoint_mb": 16,
 "checkpoint_dir": "/var/lib/k3serve/checkpoints"}
EOF
cat >"$work/etc/gateway.json" <<EOF
{"model": "/var/lib/k3serve/model", "engined": "unix:/run/k3serve/engined.sock",
 "http_listen": "127.0.0.1:$port", "grpc_listen": "127.0.0.1:0",
 "topology": "/etc/k3serve/topology.json"}
EOF
cp "$repo/deploy/config/topology.json" "$work/etc/topology.json"
chmod -R a+rX "$work/etc"

# The driver, run by systemd inside once multi-user.target is reached.
cat >"$work/units/k3test-driver.service" <<'EOF'
[Unit]
Description=k3serve units test driver
After=multi-user.target k3serve.target
[Service]
Type=oneshot
ExecStart=/bin/bash /k3test/driver.sh
ExecStopPost=/bin/systemctl --no-block poweroff
StandardOutput=file:/results/driver.log
StandardError=inherit
EOF
cat >"$work/test/driver.sh" <<EOF
#!/bin/bash
port=$port
max_exposure="$max_exposure"
EOF
cat >>"$work/test/driver.sh" <<'EOF'
set -u
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
healthy() {
  for _ in $(seq 1 "$1"); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/health" && return 0
    sleep 1
  done
  return 1
}
units="k3serve-expertd@0.service k3serve-engined.service k3serve-gateway.service"
if healthy 120; then echo "k3serve.target up: /health 200"; else
  fail "the service did not answer /health"
  systemctl status --no-pager $units
  journalctl --no-pager -n 80
fi
chat='{"messages":[{"role":"user","content":"hello"}],"max_tokens":4,"temperature":0}'
code="$(curl -s -o /results/chat.json -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "$chat" "http://127.0.0.1:$port/v1/chat/completions")"
if [ "$code" = 200 ]; then echo "chat completion: 200"; else
  fail "chat completion: HTTP $code: $(cat /results/chat.json)"
  journalctl --no-pager -n 40 -u k3serve-engined.service -u k3serve-expertd@0.service
fi
if journalctl --no-pager -u k3serve-expertd@0.service | grep -q "register_buffers failed"; then
  journalctl --no-pager -u k3serve-expertd@0.service | grep "register_buffers failed"
fi

for u in $units; do
  score="$(systemd-analyze security --no-pager "$u" 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
  echo "security $u: ${score:-?}"
  systemd-analyze security --no-pager "$u" 2>/dev/null | grep '✗' | sed 's/^/    /'
  if [ -n "$max_exposure" ] && [ -n "$score" ] &&
    [ "$(printf '%s\n%s\n' "$score" "$max_exposure" | sort -g | tail -n 1)" != "$max_exposure" ]; then
    fail "$u: exposure $score > $max_exposure"
  fi
done

for u in $units; do
  pid="$(systemctl show -p MainPID --value "$u")"
  before="$(systemctl show -p NRestarts --value "$u")"
  kill -KILL "$pid"
  restarted=0
  for _ in $(seq 1 60); do
    now="$(systemctl show -p NRestarts --value "$u")"
    newpid="$(systemctl show -p MainPID --value "$u")"
    if [ "$now" -gt "$before" ] && [ "$newpid" != 0 ] && [ "$newpid" != "$pid" ] &&
      [ "$(systemctl is-active "$u")" = active ]; then
      restarted=1
      break
    fi
    sleep 1
  done
  if [ "$restarted" -eq 1 ] && healthy 60; then
    echo "SIGKILL $u (pid $pid): restarted by systemd (NRestarts $before -> $now, pid $newpid), /health 200"
  else
    fail "SIGKILL $u (pid $pid): not back (NRestarts $before -> $now, state $(systemctl is-active "$u"))"
    journalctl --no-pager -u "$u" -n 30
  fi
done
code="$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "$chat" "http://127.0.0.1:$port/v1/chat/completions")"
[ "$code" = 200 ] && echo "chat completion after the restarts: 200" || fail "chat after restarts: HTTP $code"

systemctl stop k3serve.target $units
for u in $units; do
  r="$(systemctl show -p Result --value "$u") $(systemctl show -p ExecMainStatus --value "$u")"
  [ "$r" = "success 0" ] && echo "stop $u: $r" || fail "stop $u: $r"
done
[ "$(stat -c '%U %a' /run/k3serve/shm)" = "k3serve 750" ] &&
  echo "/run/k3serve/shm: owned by k3serve, mode 750" ||
  fail "/run/k3serve/shm: $(stat -c '%U %a' /run/k3serve/shm 2>&1)"
left="$(ls /dev/shm/ | grep k3serve; ls -A /run/k3serve/shm/ 2>/dev/null;
  ls /run/k3serve/ 2>/dev/null | grep -v -x -e '' -e shm)"
[ -z "$left" ] && echo "nothing left in /run/k3serve/shm, /dev/shm and /run/k3serve" ||
  fail "left behind: $left"
echo "failures: $fails"
echo "$fails" >/results/fails
EOF

machine="k3units$$"
echo "booting systemd in a container ($machine) ..."
rc=0
timeout 400 systemd-nspawn --quiet --register=no --keep-unit --directory=/ --volatile=yes \
  --machine="$machine" \
  --bind-ro="$bin_dir:/usr/local/bin" \
  --bind-ro="$work/units:/etc/systemd/system" \
  --bind-ro="$work/sysusers:/etc/sysusers.d" \
  --bind-ro="$work/etc:/etc/k3serve" \
  --bind-ro="$work/model:/var/lib/k3serve/model" \
  --bind-ro="$work/test:/k3test" \
  --bind="$work/results:/results" \
  --boot >"$work/console.log" 2>&1 || rc=$?
if [ ! -e "$work/results/driver.log" ]; then
  tail -40 "$work/console.log" >&2
  skip "systemd-nspawn did not run the driver (exit $rc; console above)"
fi
cat "$work/results/driver.log"
fails="$(cat "$work/results/fails" 2>/dev/null || echo "no result")"
if [ "$fails" != 0 ]; then
  echo "FAIL: $fails (nspawn exit $rc)" >&2
  tail -60 "$work/console.log" >&2
  exit 1
fi
echo "units under systemd: all checks passed"
