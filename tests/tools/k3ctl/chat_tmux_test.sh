#!/usr/bin/env bash
# usage: chat_tmux_test.sh BIN_DIR SOURCE_DIR
# k3ctl chat on a real terminal: deploy/run-local.sh starts the three daemons
# on a fresh tiny model, k3ctl chat runs inside tmux, and the test types with
# send-keys / paste-buffer and reads the screen with capture-pane, polling for
# the expected text (never a fixed sleep). Checks: the start-up errors (HTTP
# port, nothing listening), the banner, a reply with its reasoning labelled,
# Up recalls the history, Ctrl-R finds an entry, a bracketed paste is one
# message, """ blocks, an unknown /command refused locally, /save and /load,
# /stats, Ctrl-C during a reply (the gateway counts it cancelled) and at the
# prompt, a window resize, Ctrl-D exits, and the history file (mode 0600) carries over to the
# next session.
set -euo pipefail
bin=$1
src=$2
work="$(mktemp -d "${TMPDIR:-/tmp}/k3chat.XXXXXX")"
sock="$work/tmux.sock"
runner=""
T() { tmux -S "$sock" "$@"; }
cleanup() {
  T kill-server 2>/dev/null || true
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM "$runner"; wait "$runner" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  if [ -n "${pane:-}" ]; then echo "--- screen of $pane:"; T capture-pane -p -J -S -200 -t "$pane" || true; fi
  exit 1
}
screen() { T capture-pane -p -J -S -1000 -t "$pane" | sed 's/[[:space:]]*$//'; }
# Polls the screen until it holds the fixed string $1 (timeout $2 s, default 60).
wait_for() {
  local what=$1 limit=${2:-60} start=$SECONDS
  until screen | grep -qF -- "$what"; do
    ((SECONDS - start < limit)) || fail "no '$what' on the screen after ${limit}s"
    sleep 0.1
  done
}
# Polls until the last non-empty line of the screen is exactly $1.
wait_last_line() {
  local what=$1 limit=${2:-60} start=$SECONDS
  until [ "$(screen | sed '/^[[:space:]]*$/d' | tail -n 1)" = "$what" ]; do
    ((SECONDS - start < limit)) || fail "the last line is not '$what' after ${limit}s"
    sleep 0.1
  done
}
# How many times the fixed string $1 is on the screen.
count() { screen | grep -cF -- "$1" || true; }
# Polls until the fixed string $1 is on the screen at least $2 times.
wait_count() {
  local what=$1 n=$2 limit=${3:-60} start=$SECONDS
  until [ "$(count "$what")" -ge "$n" ]; do
    ((SECONDS - start < limit)) || fail "'$what' not $n times on the screen after ${limit}s"
    sleep 0.1
  done
}
# Starts k3ctl chat ARGS... in a new tmux session named $1.
start_chat() {
  local name=$1
  shift
  local cmd="XDG_STATE_HOME='$work/state' '$bin/k3ctl' chat $*; echo EXITED rc=\$?; sleep 600"
  T new-session -d -s "$name" -x 200 -y 50 "$cmd"
  pane=$name
}

# shellcheck source=tests/lib/local_stack.sh
source "$src/tests/lib/local_stack.sh"
start_local_stack "$bin" "$src" "$work"

echo "== start-up errors"
rc=0
err=$("$bin/k3ctl" chat --gateway "$http" </dev/null 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "chat on the HTTP port exited $rc"
grep -qF "$http is an HTTP port" <<<"$err" || fail "HTTP port not named: $err"
grep -qF "use the gRPC address" <<<"$err" || fail "no gRPC hint: $err"
rc=0
err=$("$bin/k3ctl" chat --gateway "unix:$work/nothing.sock" </dev/null 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "chat on nothing exited $rc"
grep -qF "nothing is listening at unix:$work/nothing.sock" <<<"$err" || fail "not 'nothing listening': $err"
echo "PASS start-up errors"

echo "== session 1"
start_chat one --gateway "$grpc" --max-tokens 6 --temperature 0
wait_for "k3ctl chat with kimi-k3 (context"
wait_for "/help lists the commands"
wait_last_line ">"
T send-keys -t one "hello there" Enter
wait_for "[reasoning]"
wait_last_line ">"
echo "PASS banner and a reply with its reasoning labelled"

T send-keys -t one Up
wait_last_line "> hello there"
T send-keys -t one C-u
wait_last_line ">"
T send-keys -t one "/frobnicate" Enter
wait_for "error: unknown command /frobnicate (not sent to the model"
wait_last_line ">"
T send-keys -t one C-r
T send-keys -t one "hello t"
wait_for "bck:hello t"
T send-keys -t one Enter

wait_count "[reasoning]" 2
wait_last_line ">"
echo "PASS Up, Ctrl-R, unknown command"

T set-buffer -b paste "$(printf 'pasted one\npasted two')"
T paste-buffer -p -d -b paste -t one
wait_for "pasted two"
T send-keys -t one Enter
wait_count "[reasoning]" 3
wait_last_line ">"
T send-keys -t one '"""' Enter
wait_last_line "..."
T send-keys -t one "block one" Enter 'block two"""' Enter
wait_count "[reasoning]" 4
wait_last_line ">"
T send-keys -t one "/save $work/chat.json" Enter
wait_for "[saved 8 messages to $work/chat.json]"
python3 - "$work/chat.json" <<'PY' || fail "the saved conversation is not what was sent"
import json, sys
doc = json.load(open(sys.argv[1]))
users = [m["content"] for m in doc["messages"] if m["role"] == "user"]
assert users == ["hello there", "hello there", "pasted one\npasted two", "block one\nblock two"], users
assert all(m["role"] == "assistant" for m in doc["messages"][1::2])
PY
echo "PASS paste is one message, \"\"\" block, /save"

T send-keys -t one "/reset" Enter
wait_for "[history cleared]"
T send-keys -t one "/load $work/chat.json" Enter
wait_for "[loaded 8 messages from $work/chat.json, thinking max]"
T send-keys -t one "/stats" Enter
wait_for "session: replies 4 (cancelled 0)"
wait_last_line ">"
T send-keys -t one "after load" Enter
wait_count "[reasoning]" 5
wait_last_line ">"
T send-keys -t one "/save $work/chat2.json" Enter
wait_for "[saved 10 messages to $work/chat2.json]"
T send-keys -t one C-d
wait_for "EXITED rc=0"
echo "PASS /load, /stats, Ctrl-D"

hist="$work/state/k3serve/history"
[ "$(stat -c %a "$hist")" = 600 ] || fail "history file mode $(stat -c %a "$hist")"
grep -qF "after\\040load" "$hist" || grep -qF "after load" "$hist" || fail "history file lacks 'after load'"
echo "PASS history file mode 0600"

echo "== session 2: history carried over, Ctrl-C"
start_chat two --gateway "$grpc" --max-tokens 100000
wait_last_line ">"
T send-keys -t two Up
wait_last_line "> /save $work/chat2.json"
T send-keys -t two C-u
# The synthetic model samples its end of message at random, so a reply may
# end before the Ctrl-C lands (on a loaded machine the screen is read late),
# and a Ctrl-C at the empty prompt exits. Then a new session tries again: the
# gateway still sees exactly one cancelled request.
for attempt in 1 2 3 4 5; do
  T send-keys -t two "a long one" Enter
  wait_for "[reasoning]"
  T send-keys -t two C-c
  start=$SECONDS
  until screen | grep -qF -e "[cancelled]" -e "EXITED rc="; do
    ((SECONDS - start < 60)) || fail "neither '[cancelled]' nor an exit after Ctrl-C in 60s"
    sleep 0.1
  done
  screen | grep -qF "[cancelled]" && break
  [ "$attempt" -lt 5 ] || fail "five replies ended on their own before their Ctrl-C"
  echo "note: reply $attempt ended before its Ctrl-C; trying again in a new session"
  T kill-session -t two
  start_chat two --gateway "$grpc" --max-tokens 100000
  wait_last_line ">"
done
wait_last_line ">"
# The server saw the client go: the gateway counts the request as cancelled.
start=$SECONDS
until curl -sS "http://$http/metrics" | grep -qE '^k3_requests_cancelled_total 1$'; do
  ((SECONDS - start < 60)) || fail "the gateway did not count the cancelled request"
  sleep 0.1
done
# A narrower window: the line wraps at the new width and editing at its start
# redraws it whole (libedit told the size on SIGWINCH; otherwise it still
# counts 200 columns and the X lands on the wrong row).
T resize-window -t two -x 30 -y 50
long=0123456789012345678901234567890123456789012345
T send-keys -t two "$long"
wait_last_line "> $long"
T send-keys -t two C-a X
wait_last_line "> X$long"
T send-keys -t two C-u
wait_last_line ">"
T resize-window -t two -x 200 -y 50
echo "PASS the line follows a window resize"
T send-keys -t two "typed, then dropped"
wait_last_line "> typed, then dropped"
T send-keys -t two C-c
wait_last_line ">"
T send-keys -t two "/stats" Enter
wait_for "session: replies 0 (cancelled 1)"
wait_last_line ">"
T send-keys -t two C-c
wait_for "EXITED rc=130"
echo "PASS Ctrl-C during a reply and at the prompt"

echo "== stop"
kill -TERM "$runner"
rc=0
wait "$runner" || rc=$?
runner=""
[ "$rc" -eq 0 ] || fail "run-local.sh exited $rc after SIGTERM"
echo "chat tmux test: all passed"
