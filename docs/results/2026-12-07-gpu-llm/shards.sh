#!/usr/bin/env bash
# On the GPU machine (issue 30): the whole gpu-llm in shards, one device
# call each, the machine kept warm between them (its /tmp holds the run):
#   STEP=first  bash shards.sh OUT R   capture and prepare (triton, cublas, torch-eager),
#                                      the seeds (slurm submit --dry-run), shard 0
#   STEP=1      bash shards.sh OUT R   shard 1; STEP=2 shard 2 (N=3 unless set)
#   STEP=last   bash shards.sh OUT R   merge the shards, audit, results and audit into OUT
# Every replay flag below is the same in each shard (the merge refuses
# shards of different plans).
set -u
W=${1:?output directory}; R=${2:?run directory}; N=${N:-3}
COHORT=${COHORT:-gpu-llm}; ROUTES=${ROUTES:-triton,cublas,torch-eager}
export TILEPIPE_ROUTES=${TILEPIPE_ROUTES:-$(pwd)/routes} PATH=$(pwd)/bin/gpu:$PATH PYTHONUNBUFFERED=1
FLAGS="--rounds 2 --target 0 --sample-ms 5 --samples 3 --singles 2 --threads ${THREADS:-16} --baseline ${BASELINE:-torch-eager}"
mkdir -p "$W" "$R"
shard() {
  timeout ${BUDGET:-540} bin/tilepipe replay --prepared "$R/prepared" --output "$R/shard$1" --shard "$1/$N" \
    --inputs "$R/job/inputs.json" $FLAGS > "$W/shard$1.out" 2> "$W/shard$1.err"
  echo "shard $1/$N: exit $?" | tee -a "$W/steps.txt"
}
case "${STEP:?first, a shard number, or last}" in
first)
  bin/tilepipe capture --cohort "$COHORT" --routes "$ROUTES" --jobs 8 --output "$R/capture" 2> "$W/capture.err"
  echo "capture: exit $?" | tee -a "$W/steps.txt"
  bin/tilepipe prepare --capture "$R/capture" --output "$R/prepared" 2> "$W/prepare.err"
  echo "prepare: exit $?" | tee -a "$W/steps.txt"
  bin/tilepipe slurm submit --prepared "$R/prepared" --shards "$N" --output "$R/job" --dry-run $FLAGS > "$W/slurm.out" 2>&1
  echo "seeds: exit $?" | tee -a "$W/steps.txt"
  shard 0 ;;
last)
  bin/tilepipe merge --prepared "$R/prepared" --output "$R/merged" $(seq -f "$R/shard%g" 0 $((N - 1))) > "$W/results.md" 2> "$W/merge.err"
  echo "merge: exit $?" | tee -a "$W/steps.txt"
  bin/tilepipe audit --capture "$R/capture" --prepared "$R/prepared" --replay "$R/merged" --output "$R/audit.json" > "$W/audit.md" 2> "$W/audit.err"
  echo "audit: exit $?" | tee -a "$W/steps.txt"
  cp "$R/audit.json" "$W/" ;;
*) shard "$STEP" ;;
esac
