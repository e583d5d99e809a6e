#!/usr/bin/env bash
# Installs every build, test and run dependency from Debian 12 packages.
# Idempotent: skips apt when everything is already installed.
#   deploy/install-deps.sh             everything (tools/test.sh)
#   deploy/install-deps.sh --programs  only what building and running the four
#                                      programs needs (deploy/quickstart.sh)
set -euo pipefail
programs_only=0
case "${1:-}" in
  "") ;;
  --programs) programs_only=1 ;;
  *) echo "install-deps: unknown argument '$1' (--programs or nothing)" >&2; exit 2 ;;
esac
pkgs=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  liburing-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libboost-dev
  nlohmann-json3-dev libpcre2-dev libcli11-dev libabsl-dev
  libssl-dev openssl libxxhash-dev iproute2
  libcpp-httplib-dev
  python3 python3-numpy python3-grpcio python3-protobuf protobuf-compiler-grpc
  curl systemd shellcheck
  clang libclang-rt-14-dev clang-format libomp-dev
  chromium
  libjs-marked node-dompurify libjs-highlight.js libjs-katex fonts-katex
  libedit-dev tmux
  libfuse3-dev fuse3
)
# libomp-dev: clang's OpenMP runtime, for the fuzz target that runs the expert
# kernels behind the remote expertd checks (tests/fuzz/fuzz_remote_request).
# libedit-dev: k3ctl chat's line editor (history, Ctrl-R, bracketed paste);
# tmux: the test that drives k3ctl chat on a real terminal.
# libboost-dev carries Boost.Beast and Asio (the gateway's HTTP server),
# libssl-dev its TLS, openssl makes the tests' self-signed certificates;
# cpp-httplib is only a client in the tests.
# chromium: the web chat page's browser test (tests/web/, headless, driven by
# playwright-core from npm).
# libjs-marked, node-dompurify, libjs-highlight.js, libjs-katex and
# fonts-katex: Markdown, sanitising, code highlighting and math of the web chat
# page, embedded into the gateway at build time (gateway/web/assets.cmake).
# libfuse3-dev and fuse3 (fusermount3): tests/faultfs, the filesystem that
# fails chosen byte ranges under expertd in the read-fault tests.
# Node.js + npm (the tokenizer cross-check and the openai client test): the
# machine's own when it has them (a nodesource nodejs bundles npm and
# conflicts with Debian's npm package), else Debian's.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
if [ "$programs_only" -eq 1 ]; then
  # expertd, engined, gateway, k3ctl (tools/build.sh --programs; the gateway
  # embeds the web page's libraries), and curl for the quickstart's request.
  pkgs=(
    build-essential cmake ninja-build pkg-config git
    libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
    liburing-dev libspdlog-dev libfmt-dev libboost-dev
    nlohmann-json3-dev libpcre2-dev libcli11-dev libabsl-dev
    libssl-dev libxxhash-dev libedit-dev curl
    libjs-marked node-dompurify libjs-highlight.js libjs-katex fonts-katex
  )
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
