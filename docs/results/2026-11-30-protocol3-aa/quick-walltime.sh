#!/bin/bash
# Replay and audit wall time on the quick cohort (its default: 1 round, 3
# routes), protocol 2 (OLD_ROOT: a checkout of c65eda8 after `make build`)
# against this tilepipe, each on its own capture and prepared stage.
# Usage: docs/results/2026-11-30-protocol3-aa/quick-walltime.sh NEW_DIR OLD_ROOT   (after make build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: quick-walltime.sh NEW_DIR OLD_ROOT}
old=$(cd "${2:?usage: quick-walltime.sh NEW_DIR OLD_ROOT}" && pwd)
mkdir "$out"
cohort=$root/capture/cohort/builtin/quick.json
for v in p2 p3; do
  tp=$root/bin/tilepipe; [ $v = p2 ] && tp=$old/bin/tilepipe
  "$tp" capture --cohort "$cohort" --output "$out/$v-cap" > /dev/null 2>&1 || true
  "$tp" prepare --capture "$out/$v-cap" --output "$out/$v-prep" > /dev/null 2>&1 || true
done
for v in p2 p3; do
  tp=$root/bin/tilepipe; [ $v = p2 ] && tp=$old/bin/tilepipe
  t0=$(date +%s.%N)
  "$tp" replay --prepared "$out/$v-prep" --output "$out/$v-rep" > "$out/$v-rep.md" 2> "$out/$v-rep.err" || true
  t1=$(date +%s.%N)
  "$tp" audit --capture "$out/$v-cap" --prepared "$out/$v-prep" --replay "$out/$v-rep" --output "$out/$v-audit.json" > "$out/$v-audit.out" 2>&1 || true
  t2=$(date +%s.%N)
  echo "$v: replay $(echo "$t1 - $t0" | bc) s, audit $(echo "$t2 - $t1" | bc) s; $(tail -1 "$out/$v-rep.err")"
done
