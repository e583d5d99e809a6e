#!/usr/bin/env bash
# usage: realspeed_test.sh BIN_DIR SOURCE_DIR SCREENSHOT_DIR MODEL_DIR
# The service at the real model's speed (issue 25, item 5): a k3-slice (made
# once into MODEL_DIR and kept while tools/mkmodel is unchanged: 6.8 GB, about
# two minutes) behind deploy/run-local.sh --drive-mbps 300, so a token takes
# seconds and a prompt tens of seconds, and a second gateway on the same
# engined with --request-timeout-s 10. Then:
#   tests/e2e/realspeed_checks.mjs   progress cadence of a streamed long
#                                    prompt, cancel during prefill, a reply
#                                    past the short deadline
#   tests/web/realspeed_browser.mjs  the web page's progress line (Chromium
#                                    screenshots in SCREENSHOT_DIR)
#   k3ctl chat in tmux               its progress line, one line rewritten in
#                                    place, gone when the text starts (the
#                                    screen saved in SCREENSHOT_DIR)
# A missing tool (node, npm, Chromium, tmux, python3-grpcio) fails the test.
set -euo pipefail
bin=$1
src=$2
shots=$3
model=$4
mbps=300
cap_s=10
work="$(mktemp -d "${TMPDIR:-/tmp}/k3real.XXXXXX")"
sock="$work/tmux.sock"
runner=""
capped=""
T() { tmux -S "$sock" "$@"; }
cleanup() {
  T kill-server 2>/dev/null || true
  if [ -n "$capped" ] && kill -0 "$capped" 2>/dev/null; then kill -TERM "$capped"; wait "$capped" || true; fi
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  if [ -n "${pane:-}" ]; then echo "--- screen:"; T capture-pane -p -J -t "$pane" || true; fi
  for f in "$work"/logs/*; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  exit 1
}

echo "== tools"
for t in node npm tmux curl /usr/bin/python3; do
  command -v "$t" >/dev/null 2>&1 || fail "$t is not installed (deploy/install-deps.sh installs it)"
done
chromium=""
for c in /usr/lib/chromium/chromium /usr/bin/chromium; do [ -x "$c" ] && chromium=$c && break; done
[ -n "$chromium" ] || fail "chromium is not installed (deploy/install-deps.sh installs it)"
/usr/bin/python3 -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed"
(cd "$src/tests/web" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in tests/web"

echo "== the k3-slice"
stamp="preset=k3-slice seed=1 mkmodel=$(cat "$src"/tools/mkmodel/*.cpp "$src"/tools/mkmodel/*.h | md5sum | cut -c1-16)"
if [ "$(cat "$model/.k3-realspeed-stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$model"
  start=$SECONDS
  "$bin/k3ctl" mkmodel --preset k3-slice --seed 1 --out "$model" >"$work/mkmodel.log" 2>&1 ||
    { tail -n 5 "$work/mkmodel.log"; fail "k3ctl mkmodel --preset k3-slice"; }
  echo "$stamp" >"$model/.k3-realspeed-stamp"
  echo "made in $((SECONDS - start)) s"
else
  echo "kept from an earlier run: $model"
fi

echo "== run-local.sh --drive-mbps $mbps"
export OMP_WAIT_POLICY=passive
"$src/deploy/run-local.sh" --model "$model" --http-port 0 --grpc-port 0 --runtime-dir "$work/run" \
  --log-dir "$work/logs" --bin-dir "$bin" --drive-mbps "$mbps" >"$work/ready.out" 2>"$work/run-local.err" &
runner=$!
for _ in $(seq 3000); do
  grep -q '^READY ' "$work/ready.out" 2>/dev/null && break
  kill -0 "$runner" 2>/dev/null || { cat "$work/run-local.err"; fail "run-local.sh exited early"; }
  sleep 0.1
done
ready=$(grep '^READY ' "$work/ready.out") || { cat "$work/run-local.err"; fail "no READY line in 5 minutes"; }
http=$(echo "$ready" | sed -n 's/.*http=\([^ ]*\).*/\1/p')
grpc=$(echo "$ready" | sed -n 's/.*grpc=\([^ ]*\).*/\1/p')
# expertd as --drive-mbps promises: the cap, O_DIRECT, the small cache.
grep -q "read_limit_mbps=$mbps " "$work/logs/expertd.log" || fail "expertd runs without --read-limit-mbps $mbps"
grep -qE "28 slots of [0-9]+ bytes .*O_DIRECT reads" "$work/logs/expertd.log" ||
  fail "expertd's segment is not 28 slots read with O_DIRECT: $(grep -F 'slots of' "$work/logs/expertd.log")"
echo "PASS $ready, expertd: $mbps MB/s, O_DIRECT, 28 slots"

"$bin/gateway" --model "$model" --engined "unix:$work/run/engined.sock" \
  --topology "$work/run/topology.json" --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
  --request-timeout-s "$cap_s" --ready-file "$work/capped.ready" >"$work/logs/gateway-capped.log" 2>&1 &
capped=$!
for _ in $(seq 300); do
  [ -s "$work/capped.ready" ] && break
  kill -0 "$capped" 2>/dev/null || fail "the capped gateway died"
  sleep 0.1
done
capped_http=$(sed -n 's/.*http=\([^ ]*\).*/\1/p' "$work/capped.ready")
[ -n "$capped_http" ] || fail "the capped gateway wrote no address"

status=0
echo "== the API: cadence, cancel, a long reply"
K3_HTTP="$http" K3_HTTP_CAPPED="$capped_http" K3_CAP_S="$cap_s" K3_MODEL="$model" \
  K3_ENGINED="unix:$work/run/engined.sock" \
  timeout 600 node "$src/tests/e2e/realspeed_checks.mjs" cadence cancel long-reply || status=1

echo "== the web page"
rm -rf "$shots"
mkdir -p "$shots"
K3_HTTP="$http" K3_SCREENSHOTS="$shots" K3_WORDS=15 \
  timeout 400 node "$src/tests/web/realspeed_browser.mjs" || status=1

echo "== k3ctl chat in tmux"
screen() { T capture-pane -p -J -t "$pane" | sed 's/[[:space:]]*$//'; }
pane=chat
T new-session -d -s chat -x 160 -y 50 \
  "XDG_STATE_HOME='$work/state' '$bin/k3ctl' chat --gateway $grpc --no-thinking --max-tokens 3 --temperature 0; echo EXITED rc=\$?; sleep 600"
start=$SECONDS
until [ "$(screen | sed '/^$/d' | tail -n 1)" = ">" ]; do
  ((SECONDS - start < 60)) || fail "no prompt after 60 s"
  sleep 0.2
done
message=$(cd "$src" && node -e "import('./tools/realspeed/sse_timing.mjs').then((m) => console.log(m.promptText(505, 15)))")
T set-buffer -b msg "$message"
T paste-buffer -p -d -b msg -t chat
T send-keys -t chat Enter
# While the prompt is read: one progress line (rewritten in place, never a
# second), until one with a count past 0 and a time left.
progress_re='^(waiting in line|starting|reading your prompt)'
seen=""
start=$SECONDS
while :; do
  s=$(screen)
  n=$(grep -cE "$progress_re" <<<"$s" || true)
  [ "$n" -le 1 ] || fail "$n progress lines on the screen: not rewritten in place"
  line=$(grep -E "$progress_re" <<<"$s" || true)
  if [ -n "$line" ] && ! grep -qxF -- "$line" <<<"$seen"; then seen+="$line"$'\n'; fi
  if [[ "$line" =~ ^reading\ your\ prompt:\ ([0-9,]+)\ of\ ([0-9,]+)\ tokens,\ about\ .+\ left$ ]] &&
    [ "${BASH_REMATCH[1]}" != 0 ]; then
    break
  fi
  ((SECONDS - start < 300)) || fail "no 'reading your prompt: D of T tokens, about X left' with D > 0 in 300 s"
  sleep 0.2
done
screen >"$shots/realspeed-03-k3ctl-chat.txt"
echo "PASS k3ctl chat shows '$line'"
start=$SECONDS
until [ "$(screen | sed '/^$/d' | tail -n 1)" = ">" ]; do
  n=$(screen | grep -cE "$progress_re" || true)
  [ "$n" -le 1 ] || fail "$n progress lines on the screen: not rewritten in place"
  ((SECONDS - start < 300)) || fail "the reply did not end in 300 s"
  sleep 0.2
done
s=$(screen)
! grep -qE "$progress_re" <<<"$s" || fail "the progress line stayed after the reply: $(grep -E "$progress_re" <<<"$s")"
screen >"$shots/realspeed-04-k3ctl-chat-answered.txt"
echo "PASS the line was erased when the text started; lines seen:"
printf '%s' "$seen" | sed 's/^/    /'
T send-keys -t chat C-d
start=$SECONDS
until screen | grep -qF "EXITED rc=0"; do
  ((SECONDS - start < 30)) || fail "k3ctl chat did not exit on Ctrl-D"
  sleep 0.2
done
pane=""

echo "== stop"
kill -TERM "$capped"
wait "$capped" || true
capped=""
kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
[ "$rc" -eq 0 ] || fail "run-local.sh exited $rc after SIGTERM"
[ "$status" -eq 0 ] || fail "a check above failed"
echo "realspeed test: all passed (screenshots in $shots)"
