#!/bin/bash
# The fresh-sample floor (issue 12): halide against itself under another
# name on two add cases of 6 and 18 MiB a set, fixed 40 rounds, audited.
# Every visit now takes three fresh samples; fresh.py shows, per case, how
# often one sample alone would have crossed the bound and how often the
# median of three does. Usage, after make build:
#   docs/results/2026-12-01-fresh-floor/run.sh NEW_DIR
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
t0=$(date +%s)
"$tp" replay --prepared "$out/prepared" --output "$out/replay" --baseline halide --target 0 --rounds 40 > "$out/replay.md" 2> "$out/replay.err" || true
echo "replay: $(( $(date +%s) - t0 )) s"
"$tp" audit --capture "$out/capture" --prepared "$out/prepared" --replay "$out/replay" --output "$out/audit.json" > "$out/audit.out" 2>&1 || true
tail -n 1 "$out/audit.out"
(cd "$root" && go run ./docs/results/2026-12-01-fresh-floor/fresh "$out/replay") > "$out/fresh.md"
cat "$out/fresh.md"
