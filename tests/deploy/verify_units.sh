#!/usr/bin/env bash
# Checks the systemd units in deploy/systemd with `systemd-analyze verify`,
# offline (PID 1 need not be systemd), and lints deploy/*.sh with shellcheck
# when it is installed.
#
#   tests/deploy/verify_units.sh BIN_DIR
#
# BIN_DIR holds expertd, engined, gateway and k3ctl: the units' /usr/local/bin
# paths are rewritten to it, since verify checks that every command exists.
# Exits 0 when all is clean, 1 on any warning or error about our units or
# scripts, 77 (skipped) when systemd-analyze is not installed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin_dir="${1:?usage: verify_units.sh BIN_DIR}"
failed=0

fail() {
  echo "FAIL: $*" >&2
  failed=1
}

# --- systemd-analyze verify.
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed (Debian package systemd)" >&2
  exit 77
fi
bin_dir="$(cd "$bin_dir" && pwd)"
for b in expertd engined gateway k3ctl; do
  [ -x "$bin_dir/$b" ] || { echo "FAIL: $bin_dir/$b is not an executable" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
units=()
for f in "$repo"/deploy/systemd/*.service "$repo"/deploy/systemd/*.target; do
  u="$(basename "$f")"
  sed "s#/usr/local/bin/#$bin_dir/#g" "$f" >"$work/$u"
  units+=("$work/$u")
done
# The template is verified as a real instance too (as systemd would load it).
cp "$work/k3serve-expertd@.service" "$work/k3serve-expertd@0.service"
units+=("$work/k3serve-expertd@0.service")
cp "$work/k3serve-expertd-remote@.service" "$work/k3serve-expertd-remote@0.service"
units+=("$work/k3serve-expertd-remote@0.service")
# The instances of the worked example in deploy/systemd/README.md: two local
# drives on the compute node, four remote ones on the storage host. Each
# instance's config, as its ExecStart names it, is one of the example's files.
example="$repo/deploy/config/examples/compute-and-storage"
cp "$work/k3serve-expertd@.service" "$work/k3serve-expertd@1.service"
units+=("$work/k3serve-expertd@1.service")
for i in 1 2 3; do
  cp "$work/k3serve-expertd-remote@.service" "$work/k3serve-expertd-remote@$i.service"
  units+=("$work/k3serve-expertd-remote@$i.service")
done
for i in 0 1; do
  cfg="$(sed -n 's#^ExecStart=.*--config /etc/k3serve/\([^ ]*\).*#\1#p' \
    "$repo/deploy/systemd/k3serve-expertd@.service" | sed "s/%i/$i/")"
  [ -f "$example/compute0/$cfg" ] || fail "k3serve-expertd@$i reads $cfg: not in $example/compute0"
done
for i in 0 1 2 3; do
  cfg="$(sed -n 's#^ExecStart=.*--config /etc/k3serve/\([^ ]*\).*#\1#p' \
    "$repo/deploy/systemd/k3serve-expertd-remote@.service" | sed "s/%i/$i/")"
  [ -f "$example/storage0/$cfg" ] ||
    fail "k3serve-expertd-remote@$i reads $cfg: not in $example/storage0"
done
for f in engined.json gateway.json topology.json; do
  [ -f "$example/compute0/$f" ] || fail "$example/compute0/$f is missing"
done
echo "verifying: ${units[*]##*/}"

# --man=no: Documentation= is not looked up; --recursive-errors=no: errors in
# the host's own units (multi-user.target, network-online.target, ...) do not
# count, only those in the units named here. SYSTEMD_LOG_LEVEL=notice keeps
# the warnings and errors, without debug chatter; no colors for the filter.
rc=0
out="$(SYSTEMD_LOG_LEVEL=notice SYSTEMD_LOG_COLOR=0 SYSTEMD_PAGER='' \
  systemd-analyze verify --man=no --recursive-errors=no "${units[@]}" 2>&1)" || rc=$?
# Every line that names one of our units or files is a finding; anything else
# is printed as host noise but does not fail the check.
ours=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  case "$line" in
    *k3serve* | *"$work"*)
      echo "  verify: $line" >&2
      ours=1
      ;;
    *) echo "  (host, ignored) $line" >&2 ;;
  esac
done <<<"$out"
if [ "$ours" -ne 0 ]; then
  fail "systemd-analyze verify reported problems in deploy/systemd (above)"
elif [ "$rc" -ne 0 ]; then
  fail "systemd-analyze verify exited with status $rc"
else
  echo "systemd-analyze verify: clean"
fi

# The exposure ratings (offline: what the unit files ask for): each at most
# 1.5 (issue 15; under a real systemd tests/deploy/nspawn_units.sh checks the
# same, the drop-in unix-sockets-only.conf lowers expertd's and engined's).
max_exposure=1.5
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
  for u in "$work"/k3serve-engined.service "$work"/k3serve-gateway.service \
    "$work"/k3serve-expertd@0.service; do
    line="$(SYSTEMD_LOG_LEVEL=err systemd-analyze security --offline=yes --no-pager "$u" \
      2>/dev/null | grep -i 'overall exposure' || true)"
    score="$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$line")"
    if [ -z "$score" ]; then
      fail "systemd-analyze security gave no exposure for ${u##*/}"
    elif [ "$(printf '%s\n%s\n' "$score" "$max_exposure" | sort -g | tail -n 1)" != "$max_exposure" ]; then
      fail "${u##*/}: exposure $score > $max_exposure"
    else
      echo "systemd-analyze security ${u##*/}: $score (<= $max_exposure)"
    fi
  done
fi

# --- The sysusers file: systemd-sysusers can parse it (into a scratch root).
if command -v systemd-sysusers >/dev/null; then
  mkdir -p "$work/root/etc"
  if ! sysusers_out="$(systemd-sysusers --root="$work/root" \
    "$repo/deploy/systemd/k3serve.sysusers.conf" 2>&1)"; then
    fail "systemd-sysusers rejected k3serve.sysusers.conf: $sysusers_out"
  elif ! grep -q '^k3serve:' "$work/root/etc/passwd"; then
    fail "systemd-sysusers did not create the k3serve user: $sysusers_out"
  else
    echo "systemd-sysusers: k3serve.sysusers.conf creates the k3serve user"
  fi
fi

# --- The example configs are JSON.
for f in "$repo"/deploy/config/*.json "$repo"/deploy/config/examples/*/*/*.json; do
  if command -v python3 >/dev/null; then
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" ||
      fail "$f is not valid JSON"
  fi
done

# --- The segment directory: the units that hold segments create it for the
# service (RuntimeDirectory=), and every config names it: expertd's
# "segment_dir", engined's "expertd" paths and the topology's "segment" paths
# are the segments of the expertd configs beside them (deploy/config and each
# host of the worked examples).
seg_dirs=""
for u in k3serve-expertd@.service k3serve-expertd-remote@.service k3serve-engined.service; do
  d="$(sed -n 's/^RuntimeDirectory=//p' "$repo/deploy/systemd/$u" | tr ' ' '\n' | grep -x 'k3serve/shm' || true)"
  [ -n "$d" ] || fail "$u: RuntimeDirectory= does not create k3serve/shm (the segment directory)"
  seg_dirs="$seg_dirs /run/$d"
done
if command -v python3 >/dev/null; then
  if consistency="$(python3 - "/run/k3serve/shm" "$repo/deploy/config" \
    "$repo"/deploy/config/examples/*/* <<'PY'
import json, pathlib, sys
seg_dir = sys.argv[1]
problems = []
for d in map(pathlib.Path, sys.argv[2:]):
    segments, sockets = [], {}
    for f in sorted(d.glob("expertd-*.json")):
        x = json.loads(f.read_text())
        if x.get("segment_dir") != seg_dir:
            problems.append(f"{f}: segment_dir is {x.get('segment_dir')!r}, not {seg_dir!r}")
        path = f"{x.get('segment_dir', '/dev/shm')}/{x['segment']}"
        if not f.name.startswith("expertd-remote-"):
            segments.append(path)
            sockets[x["listen"]] = path
    engined = d / "engined.json"
    if engined.exists():
        listed = json.loads(engined.read_text()).get("expertd", [])
        if listed != segments:
            problems.append(f"{engined}: expertd {listed} are not the segments {segments}")
    topology = d / "topology.json"
    if topology.exists():
        for e in json.loads(topology.read_text()).get("expertd", []):
            want = sockets.get(e["address"])
            if want is None:
                problems.append(f"{topology}: {e['address']} is no expertd config's listen")
            elif e.get("segment") != want:
                problems.append(f"{topology}: {e['name']} segment {e.get('segment')!r}, not {want!r}")
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
  )"; then
    echo "segment directory: units ($seg_dirs) and configs agree on /run/k3serve/shm"
  else
    fail "configs disagree on the segment directory:
$consistency"
  fi
fi

# --- shellcheck on the deploy scripts (and this one).
if command -v shellcheck >/dev/null; then
  if shellcheck "$repo"/deploy/*.sh "${BASH_SOURCE[0]}"; then
    echo "shellcheck: clean ($(cd "$repo" && echo deploy/*.sh))"
  else
    fail "shellcheck found problems in deploy/*.sh (above)"
  fi
else
  echo "shellcheck not installed: scripts not linted (Debian package shellcheck)"
fi

if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "deploy checks passed"
