#!/usr/bin/env bash
# Removes what deploy/install-systemd.sh installed: stops and disables the
# k3serve units, removes the units, the binaries, the sysusers file and the
# documentation. Keeps, unless told otherwise, everything that is the admin's:
#
#   deploy/uninstall-systemd.sh [--prefix /usr/local] [--destdir DIR] [--dry-run]
#                               [--purge-config] [--purge-state] [--purge-model]
#
# --purge-config  also removes /etc/k3serve (configs, API keys, TLS files)
# --purge-state   also removes /var/lib/k3serve/checkpoints (saved turns)
# --purge-model   also removes /var/lib/k3serve/model (the checkpoint the
#                 example configs serve; a model elsewhere is never touched)
# Without them the configs, the saved states and the model stay. The k3serve
# user and group stay too (files they own may remain; `userdel k3serve`).
# --prefix and --destdir as given to install-systemd.sh; --dry-run prints what
# it would do and changes nothing.
set -euo pipefail

prefix=/usr/local
destdir=""
dry_run=0
purge_config=0
purge_state=0
purge_model=0

# Prints the comment block at the top of this file; exits with $1 (default 2).
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a value}"; shift 2 ;;
    --prefix=*) prefix="${1#*=}"; shift ;;
    --destdir) destdir="${2:?--destdir needs a value}"; shift 2 ;;
    --destdir=*) destdir="${1#*=}"; shift ;;
    --dry-run) dry_run=1; shift ;;
    --purge-config) purge_config=1; shift ;;
    --purge-state) purge_state=1; shift ;;
    --purge-model) purge_model=1; shift ;;
    -h | --help) usage 0 ;;
    *) echo "uninstall-systemd: unknown argument '$1'" >&2; usage ;;
  esac
done
case "$prefix" in
  /*) ;;
  *) echo "uninstall-systemd: --prefix must be an absolute path" >&2; exit 2 ;;
esac
prefix="${prefix%/}"
if [ -n "$destdir" ]; then
  [ -d "$destdir" ] || { echo "uninstall-systemd: --destdir $destdir is not a directory" >&2; exit 2; }
  destdir="$(cd "$destdir" && pwd)"
fi
if [ "$dry_run" -eq 0 ] && [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
  echo "uninstall-systemd: run as root (or with --dry-run / --destdir)" >&2
  exit 1
fi

unit_dir="$destdir/etc/systemd/system"
conf_dir="$destdir/etc/k3serve"
state_dir="$destdir/var/lib/k3serve"
# What install-systemd.sh installs (keep the two lists alike).
daemons=(expertd engined gateway k3ctl)
units=(k3serve.target k3serve-expertd@.service k3serve-expertd-remote@.service k3serve-engined.service
  k3serve-gateway.service)

# Runs a command, or only prints it with --dry-run.
run() {
  if [ "$dry_run" -eq 1 ]; then
    echo "would run: $*"
  else
    "$@"
  fi
}
# Removes files or directories that exist; says so.
remove() {
  local p
  for p in "$@"; do
    if [ -e "$p" ] || [ -L "$p" ]; then
      run rm -rf -- "$p"
      [ "$dry_run" -eq 1 ] || echo "removed $p"
    fi
  done
}

# 1. Stop and disable (a live system only): the gateway first, as systemd
# orders the stop by the units' dependencies anyway.
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  run systemctl stop k3serve.target 'k3serve-gateway.service' 'k3serve-engined.service' \
    'k3serve-expertd@*.service' 'k3serve-expertd-remote@*.service' || true
  run systemctl disable "${units[@]}" || true
fi
# Links `systemctl enable` made (instances of the templates included), also
# on a staged tree or where systemd does not run.
if [ -d "$unit_dir" ]; then
  while IFS= read -r -d '' link; do
    remove "$link"
  done < <(find "$unit_dir" -mindepth 2 -maxdepth 2 -type l -name 'k3serve*' -print0)
fi

# 2. Units, their drop-ins and the .wants directories of our target, the
# sysusers file, binaries, documentation.
for u in "${units[@]}"; do
  remove "$unit_dir/$u"
done
remove "$unit_dir"/k3serve-*.service.d "$unit_dir"/k3serve.target.d "$unit_dir"/k3serve*.wants \
  "$unit_dir"/k3serve*.requires
remove "$destdir/etc/sysusers.d/k3serve.conf"
for d in "${daemons[@]}"; do
  remove "$destdir$prefix/bin/$d"
done
remove "$destdir$prefix/share/doc/k3serve"

# 3. The admin's files, only when asked.
kept=()
if [ "$purge_config" -eq 1 ]; then remove "$conf_dir"; elif [ -e "$conf_dir" ]; then kept+=("$conf_dir (--purge-config)"); fi
if [ "$purge_state" -eq 1 ]; then remove "$state_dir/checkpoints"; elif [ -e "$state_dir/checkpoints" ]; then kept+=("$state_dir/checkpoints (--purge-state)"); fi
if [ "$purge_model" -eq 1 ]; then remove "$state_dir/model"; elif [ -e "$state_dir/model" ]; then kept+=("$state_dir/model (--purge-model)"); fi
# The state directory itself once nothing is left in it.
if [ -d "$state_dir" ] && [ -z "$(ls -A "$state_dir")" ]; then
  remove "$state_dir"
fi

if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  run systemctl daemon-reload
  run systemctl reset-failed 'k3serve*' || true
fi

echo "uninstall-systemd: done$([ "$dry_run" -eq 1 ] && echo " (dry run: nothing changed)")." >&2
if [ "${#kept[@]}" -gt 0 ]; then
  echo "Kept (remove with the flag named):" >&2
  printf '  %s\n' "${kept[@]}" >&2
fi
echo "The k3serve user and group remain (userdel k3serve removes them)." >&2
