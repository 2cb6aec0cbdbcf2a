#!/usr/bin/env bash
# On the GPU machine (issue 11): tilepipe against triton.testing.do_bench on
# the methodology's agreement cases. do_bench.py first, then one capture
# and prepare of cohort.json (torch-eager) and a replay under --l2 flush
# (do_bench's policy; L2S="flush warm" adds a warm one), ROUNDS rounds (default 1), audited. Usage, from the
# repository root, with bin/tilepipe built static and bin/gpu/bwrap:
#   bash docs/results/2026-12-01-do-bench/run.sh OUT
set -u
D=$(dirname "$0") W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
TP=$(pwd)/bin/tilepipe
mkdir -p "$W"
python3 "$D/do_bench.py" > "$W/do_bench.md" 2>&1; cat "$W/do_bench.md"
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" > "$W/$name.out" 2> "$W/$name.err"
  echo "$name: exit $? in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$W/steps.txt"
  tail -n 3 "$W/$name.err"
}
step capture $TP capture --cohort "$D/cohort.json" --routes torch-eager --output "$W/capture"
step prepare $TP prepare --capture "$W/capture" --output "$W/prepared"
for l2 in ${L2S:-flush}; do
  step replay-$l2 $TP replay --prepared "$W/prepared" --output "$W/replay-$l2" --l2 $l2 --rounds ${ROUNDS:-1}
  step audit-$l2 $TP audit --capture "$W/capture" --prepared "$W/prepared" --replay "$W/replay-$l2" --output "$W/audit-$l2.json"
  cat "$W/replay-$l2.out"
done
