#!/usr/bin/env bash
# On the GPU machine (issues 29 and 30): tilepipe run of COHORT
# (gpu-llm-quick unless set) with ROUTES (triton,cublas,torch-eager unless
# set), baseline torch-eager, two rounds, EXTRA replay flags (e.g.
# "--graph-batch 32"), capture with JOBS builds at once (8 unless set), within BUDGET seconds; then every failed or
# unsupported build. Writes W/llm-*.
#   tar -xJf .gpubin/gpu.tar.xz && BUDGET=540 bash docs/results/2026-12-07-gpu-llm/run.sh $OUT /tmp/r
# A run its budget stopped goes on in the next call on the same warm
# machine (its /tmp keeps R) with STEP=resume: the replay resumed with the
# same flags (the command run printed), its results table, then the audit.
#   STEP=resume BUDGET=540 bash docs/results/2026-12-07-gpu-llm/run.sh $OUT /tmp/r
# W may hold more files than a device call brings back (8): give it
# /tmp/w and end the call with tar -cJf $OUT/texts.tar.xz -C /tmp/w .
set -u
W=${1:?output directory}; R=${2:?run directory}
COHORT=${COHORT:-gpu-llm-quick}; ROUTES=${ROUTES:-triton,cublas,torch-eager}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH PYTHONUNBUFFERED=1
FLAGS="--baseline torch-eager --rounds 2 --target 0 --sample-ms ${SAMPLE_MS:-10} --threads ${THREADS:-15} ${EXTRA:-}"
mkdir -p "$W" "$R"
nvidia-smi -L > "$W/llm-gpu.txt" 2>&1
t0=$(date +%s)
if [ "${STEP:-run}" = resume ]; then
  timeout ${BUDGET:-540} bin/tilepipe replay --prepared "$R/llm/prepared" --output "$R/llm/replay" $FLAGS --resume \
    > "$W/llm-results.md" 2> "$W/llm-resume.err"
  echo "$COHORT replay --resume: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$W/steps.txt"
  bin/tilepipe audit --capture "$R/llm/capture" --prepared "$R/llm/prepared" --replay "$R/llm/replay" \
    --output "$R/llm/audit.json" > "$W/llm-audit.out" 2> "$W/llm-audit.err"
  echo "$COHORT audit: exit $?" | tee -a "$W/steps.txt"
else
  timeout ${BUDGET:-540} bin/tilepipe run --cohort "$COHORT" --routes "$ROUTES" $FLAGS --jobs ${JOBS:-8} \
    --output "$R/llm" > "$W/llm-run.out" 2> "$W/llm-run.err"
  echo "$COHORT run: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$W/steps.txt"
  grep -E "capture: .* (failed|unsupported)|prepare: .* failed" "$W/llm-run.err" > "$W/llm-failures.txt" || true
fi
for f in results.md audit.md; do [ -f "$R/llm/$f" ] && cp "$R/llm/$f" "$W/llm-$f"; done
