#!/usr/bin/env bash
# On the GPU machine (issue 30): the small checkpoint CI audits, of
# ci-cohort.json (one tiny case of each kernel and route issue 30 added)
# with triton, cublas and torch-eager: tilepipe run, two rounds, then the
# run directory (capture, prepared, replay, audit) as OUT/ci-run.tar.xz.
#   tar -xJf .gpubin/gpu.tar.xz && bash docs/results/2026-12-07-gpu-llm/ci.sh $OUT /tmp/ci
set -u
W=${1:?output directory}; R=${2:?run directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH PYTHONUNBUFFERED=1
mkdir -p "$W" "$R"
t0=$(date +%s)
timeout ${BUDGET:-240} bin/tilepipe run --cohort docs/results/2026-12-07-gpu-llm/ci-cohort.json --routes triton,cublas,torch-eager \
  --baseline torch-eager --rounds 2 --target 0 --sample-ms ${SAMPLE_MS:-5} --samples 3 --singles 2 --jobs 8 --threads ${THREADS:-15} --output "$R/run" > "$W/ci-run.out" 2> "$W/ci-run.err"
echo "ci checkpoint run: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$W/steps.txt"
tar -cJf "$W/ci-run.tar.xz" -C "$R" run
ls -la "$W/ci-run.tar.xz" >> "$W/steps.txt"
