#!/usr/bin/env bash
# On the GPU machine (issue 30): tilepipe run of COHORT (gpu-llm-quick
# unless set) with ROUTES (triton,cublas,torch-eager unless set), baseline
# torch-eager, two rounds, within BUDGET seconds; then every triton build's
# status and reason. Writes W/llm-*.
#   tar -xJf .gpubin/gpu.tar.xz && BUDGET=540 bash docs/results/2026-12-07-gpu-llm/run.sh $OUT /tmp/r
set -u
W=${1:?output directory}; R=${2:?run directory}
COHORT=${COHORT:-gpu-llm-quick}; ROUTES=${ROUTES:-triton,cublas,torch-eager}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH PYTHONUNBUFFERED=1
mkdir -p "$W" "$R"
nvidia-smi -L > "$W/llm-gpu.txt" 2>&1
t0=$(date +%s)
timeout ${BUDGET:-540} bin/tilepipe run --cohort "$COHORT" --routes "$ROUTES" --baseline torch-eager \
  --rounds 2 --target 0 --sample-ms 10 --jobs 8 --threads ${THREADS:-15} --output "$R/llm" > "$W/llm-run.out" 2> "$W/llm-run.err"
echo "$COHORT run: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$W/steps.txt"
for f in results.md audit.md; do [ -f "$R/llm/$f" ] && cp "$R/llm/$f" "$W/llm-$f"; done
grep -E "capture: .* (failed|unsupported)|prepare: .* failed" "$W/llm-run.err" > "$W/llm-failures.txt" || true
