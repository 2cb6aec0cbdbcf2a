#!/usr/bin/env bash
# On the GPU machine, which has no Slurm: gpu-quick (triton, torch-eager)
# replayed as 2 shards by running the job directory's own shard.sbatch
# once per shard (SLURM_ARRAY_TASK_ID set by hand, as an array task's is),
# then its merge.sbatch (merge and audit), and a whole replay beside it.
# Usage, from the repository root, with a static tilepipe and a copy of
# Debian's bwrap in bin/gpu:
#   bash docs/results/2026-12-01-slurm/gpu-shards.sh OUT
set -u
W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
TP=$(pwd)/bin/gpu/tilepipe
mkdir -p "$W"
W=$(cd "$W" && pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > "$W/gpu.csv" 2>&1
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" > "$W/$name.out" 2> "$W/$name.err"
  local rc=$?
  echo "$name: exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$W/steps.txt"
  return 0
}
step capture $TP capture --cohort gpu-quick --routes triton,torch-eager --output "$W/capture"
step prepare $TP prepare --capture "$W/capture" --output "$W/prepared"
step plan $TP slurm submit --dry-run --prepared "$W/prepared" --shards 2 --output "$W/job" --tilepipe "$TP" --threads 4 --baseline torch-eager --graph-batch 32 --target 0
for i in 0 1; do step shard$i env SLURM_ARRAY_TASK_ID=$i bash "$W/job/shard.sbatch"; done
step merge bash "$W/job/merge.sbatch"
step whole $TP replay --prepared "$W/prepared" --output "$W/whole" --threads 4 --baseline torch-eager --graph-batch 32 --target 0
cat "$W/steps.txt"
head -n 40 "$W/job/audit.md"
cat "$W/job/logs/"* 2>/dev/null | tail -n 5
