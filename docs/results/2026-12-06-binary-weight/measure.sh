#!/usr/bin/env bash
# The static binary's weight at a commit (or the working tree with "."):
# stripped and not, its package count, and what of heavy it links.
# Usage: bash measure.sh REV|.   (run from the repository root)
set -euo pipefail
rev=${1:-.}
src=.
if [ "$rev" != . ]; then
  src=$(mktemp -d)
  trap 'git worktree remove --force "$src"' EXIT
  git worktree add -q --detach "$src" "$rev"
fi
out=$(mktemp -d)
(cd "$src" && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$out/stripped" ./cmd/tilepipe &&
  CGO_ENABLED=0 go build -o "$out/full" ./cmd/tilepipe &&
  CGO_ENABLED=0 go list -deps ./cmd/tilepipe > "$out/deps")
printf '%s: stripped %d bytes (%.1f MB), not stripped %d bytes (%.1f MB), %d packages linked, grpc/protobuf/flight/x-net packages: %d\n' \
  "$rev" "$(stat -c %s "$out/stripped")" "$(echo "$(stat -c %s "$out/stripped")/1000000" | bc -l)" \
  "$(stat -c %s "$out/full")" "$(echo "$(stat -c %s "$out/full")/1000000" | bc -l)" \
  "$(wc -l < "$out/deps")" "$(grep -cE '^(google.golang.org/(grpc|protobuf|genproto)|github.com/apache/arrow-go/v18/arrow/flight|golang.org/x/net)' "$out/deps" || true)"
rm -rf "$out"
