#!/bin/bash
# A/A comparison of visit protocol 3 against protocol 2: the same cases and
# routes captured, prepared and replayed by the tilepipe before issue 9
# (OLD_ROOT: a checkout of c65eda8 after `make build`) and by this one,
# replays alternating P2 P3 P3 P2 P2 P3 P3 P2 so that drift cancels.
# Usage: docs/results/2026-11-30-protocol3-aa/run.sh NEW_DIR OLD_ROOT   (after make build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: run.sh NEW_DIR OLD_ROOT}
old=$(cd "${2:?usage: run.sh NEW_DIR OLD_ROOT}" && pwd)
mkdir "$out"
for mode in p2 p3; do
  tp=$root/bin/tilepipe
  [ "$mode" = p2 ] && tp=$old/bin/tilepipe
  "$tp" capture --cohort "$here/cohort.json" --routes halide,torch-eager --output "$out/capture-$mode" 2>/dev/null
  "$tp" prepare --capture "$out/capture-$mode" --output "$out/prepared-$mode" 2>/dev/null
done
i=0
start=$(date +%s)
for mode in p2 p3 p3 p2 p2 p3 p3 p2; do
  i=$((i+1))
  tp=$root/bin/tilepipe
  [ "$mode" = p2 ] && tp=$old/bin/tilepipe
  t0=$(date +%s.%N)
  "$tp" replay --prepared "$out/prepared-$mode" --output "$out/replay-$(printf %02d $i)-$mode" --rounds 2 --samples 10 > "$out/replay-$(printf %02d $i)-$mode.md" 2>/dev/null || true
  echo "replay $i $mode: $(echo "$(date +%s.%N) - $t0" | bc) s"
done
echo "replays: $(( $(date +%s) - start )) s"
/usr/bin/python3 "$here/compare.py" "$out"
