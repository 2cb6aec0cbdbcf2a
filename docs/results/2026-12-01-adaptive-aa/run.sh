#!/bin/bash
# Issue 12's A/A precision evidence: the halide route against itself under
# another name (docs/results/2026-11-30-sandbox-aa/halide-b: the same
# objects byte for byte), on the issue's six cases, replayed twice from one
# prepared stage: fixed rounds (--target 0, the default 6 rounds, as
# before adaptive rounds) and at the default settings (adaptive to ±1.5%,
# 60 s of visits per row), each audited. Usage, after make build:
#   docs/results/2026-12-01-adaptive-aa/run.sh NEW_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: run.sh NEW_DIR}
tp=$root/bin/tilepipe
export TILEPIPE_ROUTES=$root/bin/routes TILEPIPE_HALIDE_ROUTE=$root/bin/routes/halide/route
mkdir "$out"
"$tp" capture --cohort "$here/cohort.json" --routes halide --route-exec "$root/docs/results/2026-11-30-sandbox-aa/halide-b" \
  --route-env TILEPIPE_HALIDE_ROUTE=$TILEPIPE_HALIDE_ROUTE --output "$out/capture" 2> "$out/capture.err"
"$tp" prepare --capture "$out/capture" --output "$out/prepared" 2> "$out/prepare.err"
for mode in fixed adaptive; do
  flags=()
  [ "$mode" = fixed ] && flags=(--target 0)
  t0=$(date +%s)
  "$tp" replay --prepared "$out/prepared" --output "$out/replay-$mode" --baseline halide "${flags[@]}" > "$out/$mode.md" 2> "$out/$mode.err" || true
  echo "replay $mode: $(( $(date +%s) - t0 )) s"
  "$tp" audit --capture "$out/capture" --prepared "$out/prepared" --replay "$out/replay-$mode" --output "$out/audit-$mode.json" > "$out/audit-$mode.out" 2>&1 || true
  tail -n 1 "$out/audit-$mode.out"
done
