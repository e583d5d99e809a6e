#!/usr/bin/env bash
# Installs k3serve as systemd services: the binaries, the units, the k3serve
# user (systemd-sysusers) and example configs in /etc/k3serve (an existing
# config is never overwritten). Run as root from a built clone:
#
#   deploy/install-systemd.sh [--prefix /usr/local] [--bin-dir build/bin]
#                             [--destdir DIR] [--dry-run]
#
# --dry-run prints what it would do and changes nothing. --destdir stages the
# files under DIR (for packaging) and skips systemd-sysusers and daemon-reload.
# Then: edit /etc/k3serve/*.json and `systemctl enable --now k3serve-expertd@0
# k3serve.target` (see deploy/systemd/README.md).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix=/usr/local
bin_dir="$repo/build/bin"
destdir=""
dry_run=0

# Prints the comment block at the top of this file; exits with $1 (default 2).
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a value}"; shift 2 ;;
    --bin-dir) bin_dir="${2:?--bin-dir needs a value}"; shift 2 ;;
    --destdir) destdir="${2:?--destdir needs a value}"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage 0 ;;
    *) echo "install-systemd: unknown argument '$1'" >&2; usage ;;
  esac
done
case "$prefix" in
  /*) ;;
  *) echo "install-systemd: --prefix must be an absolute path" >&2; exit 2 ;;
esac
prefix="${prefix%/}"

unit_dir="$destdir/etc/systemd/system"
sysusers_dir="$destdir/etc/sysusers.d"
conf_dir="$destdir/etc/k3serve"
doc_dir="$destdir$prefix/share/doc/k3serve"
daemons=(expertd engined gateway k3ctl)
units=(k3serve.target k3serve-expertd@.service k3serve-expertd-remote@.service k3serve-engined.service
  k3serve-gateway.service)
configs=(expertd-0.json expertd-remote-0.json engined.json gateway.json topology.json api-keys.example)

# Runs a command, or only prints it with --dry-run.
run() {
  if [ "$dry_run" -eq 1 ]; then
    echo "would run: $*"
  else
    "$@"
  fi
}

# Preconditions first, so that a failure leaves nothing half-installed.
for d in "${daemons[@]}"; do
  if [ ! -x "$bin_dir/$d" ]; then
    echo "install-systemd: $bin_dir/$d is missing: build first (tools/build.sh) or pass --bin-dir" >&2
    exit 1
  fi
done
if [ "$dry_run" -eq 0 ] && [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install-systemd: run as root (or with --dry-run / --destdir)" >&2
  exit 1
fi

# 1. Binaries.
run install -d -m 0755 "$destdir$prefix/bin"
for d in "${daemons[@]}"; do
  run install -m 0755 "$bin_dir/$d" "$destdir$prefix/bin/$d"
done

# 2. The user and group (before the configs, which are group k3serve).
run install -d -m 0755 "$sysusers_dir"
run install -m 0644 "$repo/deploy/systemd/k3serve.sysusers.conf" "$sysusers_dir/k3serve.conf"
if [ -z "$destdir" ]; then
  run systemd-sysusers "$sysusers_dir/k3serve.conf"
fi

# 3. Units, with the binaries' paths under the chosen prefix.
run install -d -m 0755 "$unit_dir" "$doc_dir"
for u in "${units[@]}"; do
  if [ "$dry_run" -eq 1 ]; then
    echo "would write: $unit_dir/$u (ExecStart under $prefix/bin)"
  else
    sed -e "s#/usr/local/bin/#$prefix/bin/#g" -e "s#/usr/local/share/doc/#$prefix/share/doc/#g" \
      "$repo/deploy/systemd/$u" >"$unit_dir/$u.tmp"
    chmod 0644 "$unit_dir/$u.tmp"
    mv -f "$unit_dir/$u.tmp" "$unit_dir/$u"
  fi
done
run install -m 0644 "$repo/deploy/systemd/README.md" "$doc_dir/systemd.md"

# 4. Configs: examples only where the admin has none yet.
run install -d -m 0750 "$conf_dir"
for c in "${configs[@]}"; do
  if [ -e "$conf_dir/$c" ]; then
    echo "keeping existing $conf_dir/$c"
  else
    run install -m 0640 "$repo/deploy/config/$c" "$conf_dir/$c"
  fi
done
# Readable by the daemons (group k3serve), not by everyone: API keys live here.
if [ -z "$destdir" ]; then
  run chgrp -R k3serve "$conf_dir"
  if [ -d /run/systemd/system ]; then
    run systemctl daemon-reload
  else
    echo "install-systemd: systemd is not running here: skipped daemon-reload" >&2
  fi
fi

cat >&2 <<EOF
install-systemd: done$([ "$dry_run" -eq 1 ] && echo " (dry run: nothing changed)").
Next: put the model in /var/lib/k3serve/model (or edit "model" in $conf_dir/*.json),
check $conf_dir/*.json, then
  systemctl enable --now k3serve-expertd@0.service k3serve.target
One expertd per drive: copy expertd-0.json to expertd-1.json (own listen, segment and
shard_dir), add its segment to engined.json and its address to topology.json, then
  systemctl enable --now k3serve-expertd@1.service && systemctl restart k3serve.target
EOF
