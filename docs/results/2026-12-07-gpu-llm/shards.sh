#!/usr/bin/env bash
# On the GPU machine (issue 30): the whole gpu-llm in shards, one device
# call each, the machine kept warm between them (its /tmp holds the run;
# a machine is given back 30 s after its last call, so the calls must
# follow each other at once):
#   STEP=first  bash shards.sh OUT R   capture and prepare (triton, cublas, torch-eager),
#                                      the seeds (slurm submit --dry-run)
#   STEP=0      bash shards.sh OUT R   shard 0; STEP=1, STEP=2 the others (N=3 unless
#                                      set); a shard stopped by its budget resumes when
#                                      its step is given again
#   STEP=last   bash shards.sh OUT R   merge the shards, audit, results and audit into OUT
# Every replay flag below is the same in each shard (the merge refuses
# shards of different plans). THREADS (15) leaves one of the 16 cores to
# replay itself.
set -u
W=${1:?output directory}; R=${2:?run directory}; N=${N:-3}
COHORT=${COHORT:-gpu-llm}; ROUTES=${ROUTES:-triton,cublas,torch-eager}
export TILEPIPE_ROUTES=${TILEPIPE_ROUTES:-$(pwd)/routes} PATH=$(pwd)/bin/gpu:$PATH PYTHONUNBUFFERED=1
FLAGS="--rounds 2 --target 0 --sample-ms 5 --samples 3 --singles 2 --threads ${THREADS:-15} --baseline ${BASELINE:-torch-eager}"
mkdir -p "$W" "$R"
shard() {
  resume=""
  [ -e "$R/shard$1" ] && resume=--resume
  timeout ${BUDGET:-540} bin/tilepipe replay --prepared "$R/prepared" --output "$R/shard$1" --shard "$1/$N" \
    --inputs "$R/job/inputs.json" $FLAGS $resume > "$W/shard$1.out" 2> "$W/shard$1.err"
  echo "shard $1/$N: exit $?" | tee -a "$W/steps.txt"
}
case "${STEP:?first, a shard number or last}" in
first)
  bin/tilepipe capture --cohort "$COHORT" --routes "$ROUTES" --jobs 8 --output "$R/capture" 2> "$W/capture.err"
  echo "capture: exit $?" | tee -a "$W/steps.txt"
  bin/tilepipe prepare --capture "$R/capture" --output "$R/prepared" 2> "$W/prepare.err"
  echo "prepare: exit $?" | tee -a "$W/steps.txt"
  bin/tilepipe slurm submit --prepared "$R/prepared" --shards "$N" --output "$R/job" --dry-run $FLAGS > "$W/slurm.out" 2>&1
  echo "seeds: exit $?" | tee -a "$W/steps.txt" ;;
last)
  bin/tilepipe merge --prepared "$R/prepared" --output "$R/merged" $(seq -f "$R/shard%g" 0 $((N - 1))) > "$W/results.md" 2> "$W/merge.err"
  echo "merge: exit $?" | tee -a "$W/steps.txt"
  bin/tilepipe audit --capture "$R/capture" --prepared "$R/prepared" --replay "$R/merged" --output "$R/audit.json" > "$W/audit.md" 2> "$W/audit.err"
  echo "audit: exit $?" | tee -a "$W/steps.txt"
  cp "$R/audit.json" "$W/" ;;
*) shard "$STEP" ;;
esac
