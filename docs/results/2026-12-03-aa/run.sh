#!/bin/bash
# A/A of visit protocol 4 against protocol 3 (issue 26): the same cases and
# routes captured, prepared and replayed by the tilepipe before protocol 4
# reached the CPU (OLD_ROOT: a checkout of def7563 after `make build`) and
# by this one, replays alternating P3 P4 P4 P3 P3 P4 P4 P3 so that drift
# cancels. Protocol 3's rows rest on warm batch samples; protocol 4's on
# novel samples, with the same warm batch samples beside them (warmNs).
# Usage: docs/results/2026-12-03-aa/run.sh NEW_DIR OLD_ROOT   (after make build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: run.sh NEW_DIR OLD_ROOT}
old=$(cd "${2:?usage: run.sh NEW_DIR OLD_ROOT}" && pwd)
mkdir "$out"
for mode in p3 p4; do
  tp=$root/bin/tilepipe routes=$root/bin/routes
  [ "$mode" = p3 ] && tp=$old/bin/tilepipe routes=$old/bin/routes
  TILEPIPE_ROUTES=$routes "$tp" capture --cohort "$here/cohort.json" --routes halide,torch-eager --output "$out/capture-$mode" 2>/dev/null
  TILEPIPE_ROUTES=$routes "$tp" prepare --capture "$out/capture-$mode" --output "$out/prepared-$mode" 2>/dev/null
done
i=0
start=$(date +%s)
for mode in p3 p4 p4 p3 p3 p4 p4 p3; do
  i=$((i+1))
  tp=$root/bin/tilepipe
  [ "$mode" = p3 ] && tp=$old/bin/tilepipe
  t0=$(date +%s.%N)
  "$tp" replay --prepared "$out/prepared-$mode" --output "$out/replay-$(printf %02d $i)-$mode" --rounds 2 --target 0 --samples 10 > "$out/replay-$(printf %02d $i)-$mode.md" 2>/dev/null || true
  echo "replay $i $mode: $(echo "$(date +%s.%N) - $t0" | bc) s"
done
echo "replays: $(( $(date +%s) - start )) s"
/usr/bin/python3 "$here/compare.py" "$out"
