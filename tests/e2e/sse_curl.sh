#!/usr/bin/env bash
# End-to-end check of the gateway's HTTP API with plain curl: the SSE framing
# of a streamed chat completion, the OpenAI error body of a malformed request,
# /tokenize and /detokenize, 404 and 405, a JSON body under curl's default
# form Content-Type, and the Prometheus metrics.
#
#   tests/e2e/sse_curl.sh [HOST:PORT | http=HOST:PORT ...]
#
# The address comes from the argument or env K3_HTTP (the fields of
# run-local.sh's READY line are accepted as they are); env K3_API_KEY adds
# `Authorization: Bearer KEY`. Never looks at the generated text (the synthetic
# model writes random text). Prints one line per check and "N passed, N failed";
# exits 1 on a failure.
set -euo pipefail

addr="${K3_HTTP:-}"
for arg in "$@"; do
  case "$arg" in
    http=*) addr="${arg#http=}" ;;
    *=*) ;; # grpc=... and other fields of the READY line
    *) addr="$arg" ;;
  esac
done
if [ -z "$addr" ]; then
  echo "usage: sse_curl.sh HOST:PORT   (or env K3_HTTP=HOST:PORT)" >&2
  exit 2
fi
base="http://${addr#http://}"
python=/usr/bin/python3
[ -x "$python" ] || python=python3

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
curl_args=(-sS --max-time "${K3_E2E_TIMEOUT_S:-300}")
if [ -n "${K3_API_KEY:-}" ]; then
  curl_args+=(-H "Authorization: Bearer $K3_API_KEY")
fi

passed=0
failed=0
pass() {
  passed=$((passed + 1))
  echo "PASS $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $1: $2"
}

# The value of header $2 (case-insensitive) in the header dump $1.
header() {
  tr -d '\r' <"$1" |
    awk -v h="$2" 'tolower($0) ~ "^" tolower(h) ":" { sub(/^[^:]*:[ \t]*/, ""); v = $0 } END { print v }'
}

echo "gateway: $base"

# --- The model id (the only one).
model=""
if curl "${curl_args[@]}" -f -o "$work/models.json" "$base/v1/models"; then
  model="$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"][0]["id"])' \
    "$work/models.json" 2>/dev/null)" || true
fi
if [ -n "$model" ]; then
  pass "GET /v1/models names the model ($model)"
else
  fail "GET /v1/models" "no model id in: $(head -c 300 "$work/models.json" 2>/dev/null)"
fi

# --- A streamed chat completion: SSE framing.
request="$("$python" -c 'import json, sys; print(json.dumps({"model": sys.argv[1],
  "messages": [{"role": "user", "content": "Hello! Say something short."}],
  "max_tokens": 12, "stream": True}))' "$model")"
status="$(curl "${curl_args[@]}" -N -o "$work/stream.txt" -D "$work/stream.hdr" -w '%{http_code}' \
  -H 'Content-Type: application/json' -d "$request" "$base/v1/chat/completions" || true)"
ctype="$(header "$work/stream.hdr" Content-Type)"
if [ "$status" != 200 ]; then
  fail "streamed chat completion" "HTTP $status: $(head -c 300 "$work/stream.txt")"
else
  pass "streamed chat completion answers 200"
  case "$ctype" in
    text/event-stream*) pass "Content-Type is text/event-stream" ;;
    *) fail "Content-Type" "'$ctype', expected text/event-stream" ;;
  esac
  # Every event is one `data: {json}` line (SSE comments ':' allowed), events
  # are separated by blank lines, and the last one is `data: [DONE]`.
  if verdict="$("$python" - "$work/stream.txt" 2>&1 <<'EOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().replace("\r\n", "\n").split("\n")
data = [l for l in lines if l and not l.startswith(":")]
bad = [l for l in data if not l.startswith("data: ")]
if bad:
    sys.exit(f"a line is not 'data: ...': {bad[0][:200]!r}")
if not data or data[-1] != "data: [DONE]":
    sys.exit(f"the stream does not end with 'data: [DONE]' (last: {data[-1][:200] if data else None!r})")
chunks = []
for l in data[:-1]:
    try:
        chunks.append(json.loads(l[len("data: "):]))
    except ValueError as e:
        sys.exit(f"not JSON ({e}): {l[:200]!r}")
if not chunks:
    sys.exit("no chunk before [DONE]")
for c in chunks:
    if c.get("object") != "chat.completion.chunk":
        sys.exit(f"object is {c.get('object')!r}: {json.dumps(c)[:200]}")
finishes = [ch.get("finish_reason") for c in chunks for ch in c.get("choices", [])]
if not finishes or finishes[-1] not in ("stop", "length"):
    sys.exit(f"the last choice has finish_reason {finishes[-1] if finishes else None!r}")
print(f"{len(chunks)} JSON chunks, finish_reason {finishes[-1]}")
EOF
  )"; then
    pass "SSE framing: data: {json} lines, then data: [DONE] ($verdict)"
  else
    fail "SSE framing" "$verdict; the stream began: $(head -c 300 "$work/stream.txt")"
  fi
fi

# --- Malformed JSON: 400 with an OpenAI error body.
status="$(curl "${curl_args[@]}" -o "$work/bad.json" -w '%{http_code}' \
  -H 'Content-Type: application/json' -d '{"model": "x", "messages": [' \
  "$base/v1/chat/completions" || true)"
if [ "$status" != 400 ]; then
  fail "invalid JSON" "HTTP $status, expected 400: $(head -c 300 "$work/bad.json")"
elif "$python" -c 'import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert isinstance(e["message"], str) and e["message"], "empty error.message"
assert isinstance(e["type"], str) and e["type"], "empty error.type"' "$work/bad.json" 2>/dev/null; then
  pass "invalid JSON -> 400 with {\"error\": {\"message\", \"type\"}}"
else
  fail "invalid JSON" "the body is not an OpenAI error: $(head -c 300 "$work/bad.json")"
fi

# --- Routes beyond the OpenAI ones, and routing errors.
status="$(curl "${curl_args[@]}" -o "$work/tok.json" -w '%{http_code}' \
  -H 'Content-Type: application/json' -d '{"content": "hello world"}' "$base/tokenize" || true)"
if [ "$status" = 200 ] &&
  ids="$("$python" -c 'import json, sys; print(json.dumps({"tokens": json.load(open(sys.argv[1]))["tokens"]}))' "$work/tok.json")" &&
  [ "$(curl "${curl_args[@]}" -H 'Content-Type: application/json' -d "$ids" "$base/detokenize" |
    "$python" -c 'import json, sys; print(json.load(sys.stdin)["content"])')" = "hello world" ]; then
  pass "POST /tokenize then /detokenize round-trips"
else
  fail "/tokenize, /detokenize" "HTTP $status: $(head -c 300 "$work/tok.json")"
fi
status="$(curl "${curl_args[@]}" -o "$work/404.json" -w '%{http_code}' "$base/no/such/route" || true)"
if [ "$status" = 404 ] && grep -q '"not_found"' "$work/404.json"; then
  pass "unknown route: 404 not_found"
else
  fail "unknown route" "HTTP $status: $(head -c 300 "$work/404.json")"
fi
status="$(curl "${curl_args[@]}" -o /dev/null -D "$work/405.hdr" -w '%{http_code}' \
  "$base/v1/chat/completions" || true)"
if [ "$status" = 405 ] && [ "$(header "$work/405.hdr" Allow)" = POST ]; then
  pass "GET on a POST route: 405 with Allow: POST"
else
  fail "wrong method" "HTTP $status, Allow '$(header "$work/405.hdr" Allow)'"
fi
# curl -d sends application/x-www-form-urlencoded: a JSON body is still JSON.
status="$(curl "${curl_args[@]}" -o "$work/form.json" -w '%{http_code}' \
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}' \
  "$base/v1/chat/completions" || true)"
if [ "$status" = 200 ]; then
  pass "a JSON body sent as curl's default form type is accepted"
else
  fail "JSON body with a form Content-Type" "HTTP $status: $(head -c 300 "$work/form.json")"
fi

# --- Prometheus metrics.
status="$(curl "${curl_args[@]}" -o "$work/metrics.txt" -D "$work/metrics.hdr" -w '%{http_code}' \
  "$base/metrics" || true)"
if [ "$status" != 200 ]; then
  fail "GET /metrics" "HTTP $status"
else
  ctype="$(header "$work/metrics.hdr" Content-Type)"
  case "$ctype" in
    text/plain* | application/openmetrics-text*) pass "GET /metrics answers 200 ($ctype)" ;;
    *) fail "GET /metrics Content-Type" "'$ctype', expected text/plain" ;;
  esac
  for m in k3_requests_total k3_queue_depth k3_time_to_first_token_seconds \
    k3_generated_tokens_total k3_expert_hit_ratio k3_expert_read_gbps; do
    # A sample line: NAME, NAME{labels} or a histogram's NAME_bucket/_sum/_count.
    if grep -Eq "^${m}(_bucket|_sum|_count)?(\\{[^}]*\\})? [^ ]+" "$work/metrics.txt"; then
      pass "metric $m"
    else
      fail "metric $m" "no sample line in /metrics"
    fi
  done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
