#!/usr/bin/env bash
# docs_current: docs/cli.md is what tools/cli-doc.sh writes from the built
# programs, and every relative link of README.md and docs/*.md points at a
# file of the repository (no link leaves it).
# usage: docs_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin="$1" src="$2"
fail=0
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
"$src/tools/cli-doc.sh" "$bin" "$tmp"
if ! diff -u "$src/docs/cli.md" "$tmp"; then
  echo "FAIL docs/cli.md differs from the programs' --help: run tools/cli-doc.sh" >&2
  fail=1
fi
links=0
for md in "$src/README.md" "$src"/docs/*.md; do
  dir="$(dirname "$md")"
  # Markdown links [text](target), not images of other hosts.
  while IFS= read -r target; do
    target="${target%%#*}"
    [[ -z "$target" ]] && continue
    case "$target" in
      http://127.0.0.1* | http://localhost*) continue ;;
      http://* | https://* | mailto:*)
        echo "FAIL ${md#"$src"/}: link leaves the repository: $target" >&2
        fail=1
        continue
        ;;
    esac
    links=$((links + 1))
    if [[ ! -e "$dir/$target" ]]; then
      echo "FAIL ${md#"$src"/}: link to a missing file: $target" >&2
      fail=1
    elif [[ "$(realpath "$dir/$target")" != "$(realpath "$src")"/* ]]; then
      echo "FAIL ${md#"$src"/}: link leaves the repository: $target" >&2
      fail=1
    fi
  done < <(grep -o '\]([^)]*)' "$md" | sed 's/^](//; s/)$//')
done
echo "docs: cli.md current; $links relative links checked"
exit "$fail"
