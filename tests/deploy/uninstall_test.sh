#!/usr/bin/env bash
# deploy/uninstall-systemd.sh undoes deploy/install-systemd.sh on a staged
# tree (--destdir): every installed file and `systemctl enable` link goes, the
# configs, saved states and the model stay unless their --purge-* flag is
# given; --dry-run changes nothing; both scripts list the same programs and
# units.
#
#   tests/deploy/uninstall_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3uninstall.XXXXXX")"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"
fail=0
check() { # check DESCRIPTION COMMAND...
  local what="$1"
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
snapshot() { (cd "$root" && find . | sort); }

for list in daemons units; do
  a=$(grep "^$list=(" -A1 "$src/deploy/install-systemd.sh" | tr -s ' \n' ' ')
  b=$(grep "^$list=(" -A1 "$src/deploy/uninstall-systemd.sh" | tr -s ' \n' ' ')
  check "install and uninstall list the same $list" [ "$a" = "$b" ]
done

"$src/deploy/install-systemd.sh" --destdir "$root" --bin-dir "$bin" >/dev/null 2>&1
# What an admin adds: an enabled instance, a drop-in, the model, saved states.
mkdir -p "$root/etc/systemd/system/k3serve.target.wants" "$root/var/lib/k3serve/model" \
  "$root/var/lib/k3serve/checkpoints" "$root/etc/systemd/system/k3serve-engined.service.d"
ln -s ../k3serve-expertd@.service "$root/etc/systemd/system/k3serve.target.wants/k3serve-expertd@0.service"
echo '[Service]' >"$root/etc/systemd/system/k3serve-engined.service.d/override.conf"
echo '{}' >"$root/var/lib/k3serve/model/config.json"
echo x >"$root/var/lib/k3serve/checkpoints/turn.k3ck"
# Something of the host's beside ours stays whatever happens.
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -s /lib/systemd/system/ssh.service "$root/etc/systemd/system/multi-user.target.wants/ssh.service"
check "the install put the binaries and units there" \
  test -x "$root/usr/local/bin/engined" -a -f "$root/etc/systemd/system/k3serve-engined.service"

before=$(snapshot)
"$src/deploy/uninstall-systemd.sh" --destdir "$root" --dry-run >"$work/dry.out" 2>&1
check "--dry-run changes nothing" [ "$before" = "$(snapshot)" ]
check "--dry-run says what it would remove" grep -q "would run: rm -rf -- $root/usr/local/bin/engined" "$work/dry.out"

"$src/deploy/uninstall-systemd.sh" --destdir "$root" >"$work/out" 2>&1
left=$(cd "$root" && find . \( -name 'k3serve*' -o -path '*/bin/*' -o -path '*/doc/*' \) | sort)
expected=$(printf '%s\n' ./etc/k3serve ./var/lib/k3serve)
check "only the configs and /var/lib/k3serve are left of k3serve" [ "$left" = "$expected" ]
check "the model stays" test -f "$root/var/lib/k3serve/model/config.json"
check "the saved states stay" test -f "$root/var/lib/k3serve/checkpoints/turn.k3ck"
check "the configs stay" test -f "$root/etc/k3serve/engined.json"
check "the host's own links stay" test -L "$root/etc/systemd/system/multi-user.target.wants/ssh.service"
check "it names what it kept and the flag that removes it" \
  grep -q "var/lib/k3serve/model (--purge-model)" "$work/out"

"$src/deploy/uninstall-systemd.sh" --destdir "$root" --purge-config --purge-state >"$work/out" 2>&1
check "--purge-config removes the configs" test ! -e "$root/etc/k3serve"
check "--purge-state removes the saved states" test ! -e "$root/var/lib/k3serve/checkpoints"
check "... and not the model" test -f "$root/var/lib/k3serve/model/config.json"
"$src/deploy/uninstall-systemd.sh" --destdir "$root" --purge-model >"$work/out" 2>&1
check "--purge-model removes the model, then the empty state directory" test ! -e "$root/var/lib/k3serve"

rc=0
"$src/deploy/uninstall-systemd.sh" --destdir "$root" --purge-everything >/dev/null 2>"$work/err" || rc=$?
check "an unknown flag is refused by name" grep -q "unknown argument '--purge-everything'" "$work/err"
check "... with exit 2" [ "$rc" -eq 2 ]
exit "$fail"
