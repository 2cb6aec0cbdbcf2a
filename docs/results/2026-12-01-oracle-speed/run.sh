#!/usr/bin/env bash
# On the GPU machine (issue 12): capture, prepare, replay (1 round) and
# audit of the 2^28 add on torch-eager, each stage under
# TILEPIPE_CPUPROFILE, the profiles' top functions printed. Compare with
# docs/results/2026-12-01-do-bench (the same case before the elementwise
# oracle ran on every core). Usage, from the repository root, with
# bin/tilepipe built static and bin/gpu/bwrap:
#   bash docs/results/2026-12-01-oracle-speed/run.sh OUT
set -u
D=$(dirname "$0") W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
TP=$(pwd)/bin/tilepipe
mkdir -p "$W"
nproc | sed 's/^/cores: /' | tee "$W/steps.txt"
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s%N)
  TILEPIPE_CPUPROFILE="$W/$name.prof" "$@" > "$W/$name.out" 2> "$W/$name.err"
  echo "$name: exit $? in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$W/steps.txt"
  tail -n 3 "$W/$name.err"
}
step capture $TP capture --cohort "$D/cohort.json" --routes torch-eager --output "$W/capture"
step prepare $TP prepare --capture "$W/capture" --output "$W/prepared"
step replay $TP replay --prepared "$W/prepared" --output "$W/replay" --l2 flush --rounds 1 --target 0
step audit $TP audit --capture "$W/capture" --prepared "$W/prepared" --replay "$W/replay" --output "$W/audit.json"
cat "$W/replay.out"
tail -n 1 "$W/audit.out"
