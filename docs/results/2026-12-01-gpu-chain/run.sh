#!/usr/bin/env bash
# On the GPU machine (issue 11): the whole chain, stage by stage, for a
# GPU cohort, then the audit. Usage, from the repository root, with
# bin/tilepipe built static and a copy of Debian's bwrap in bin/gpu:
#   bash docs/results/2026-12-01-gpu-chain/run.sh COHORT ROUTES OUT [REPLAY FLAGS...]
# STAGES=capture stops after the capture; JOBS=N builds N cases at once.
set -u
COHORT=${1:?cohort} ROUTES=${2:?routes} W=${3:?output directory}
shift 3
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
TP=$(pwd)/bin/tilepipe
mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$W/gpu.csv" 2>&1
$TP routes > "$W/routes.txt" 2>&1
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" > "$W/$name.out" 2> "$W/$name.err"
  local rc=$?
  echo "$name: exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$W/steps.txt"
  tail -n 4 "$W/$name.err"
  return 0
}
step capture $TP capture --cohort "$COHORT" --routes "$ROUTES" --jobs "${JOBS:-2}" --output "$W/capture"
[ "${STAGES:-}" = capture ] && exit 0
step prepare $TP prepare --capture "$W/capture" --output "$W/prepared"
step replay $TP replay --prepared "$W/prepared" --output "$W/replay" "$@"
step audit $TP audit --capture "$W/capture" --prepared "$W/prepared" --replay "$W/replay" --output "$W/audit.json"
cat "$W/replay.out"; head -n 30 "$W/audit.md"
