#!/bin/bash
# A/A comparison of the visit sandbox: the same Halide objects under two
# route names (halide, halide-b), replayed from one prepared stage ten times,
# with and without the sandbox in the order S N N S S N N S S N so that
# drift cancels.
# Usage: docs/results/2026-11-30-sandbox-aa/run.sh OUT_DIR   (after make build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tp=$root/bin/tilepipe
out=${1:?usage: run.sh NEW_DIR}
mkdir "$out"
export TILEPIPE_HALIDE_ROUTE=$root/bin/routes/halide/route
"$tp" capture --cohort "$here/cohort.json" --routes halide --route-exec "$here/halide-b" --route-env "TILEPIPE_HALIDE_ROUTE=$TILEPIPE_HALIDE_ROUTE" --output "$out/capture"
"$tp" prepare --capture "$out/capture" --output "$out/prepared"
i=0
for mode in sandbox none none sandbox sandbox none none sandbox sandbox none; do
  i=$((i+1))
  flags=()
  [ "$mode" = none ] && flags=(--no-sandbox)
  "$tp" replay --prepared "$out/prepared" --output "$out/replay-$(printf %02d $i)-$mode" --baseline halide --rounds 2 --samples 10 "${flags[@]}" > "$out/replay-$(printf %02d $i)-$mode.md"
done
/usr/bin/python3 "$here/compare.py" "$out"
