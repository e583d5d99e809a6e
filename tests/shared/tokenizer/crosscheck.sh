#!/bin/sh
# usage: crosscheck.sh K3CTL SOURCE_DIR
# Installs the pinned npm packages (npm ci) into tests/node and runs
# tests/node/crosscheck.cjs on tests/data/tokenizer/corpus.json and on the long
# texts of tests/node/kimi_chunks.cjs (Kimi's chunking of long text).
set -eu
k3ctl=$1
src=$2
if ! command -v npm >/dev/null 2>&1; then
  echo "SKIPPED: npm is not installed; the tokenizer cross-check against tiktoken needs node + npm"
  exit 77
fi
cd "$src/tests/node"
npm ci --no-audit --no-fund --loglevel=error
node crosscheck.cjs --k3ctl "$k3ctl" --corpus "$src/tests/data/tokenizer/corpus.json"
