#!/usr/bin/env bash
# On the GPU machine (issue 27, "warm outputs are never refilled on the
# device"): both CUDA timers upload replay's fill over the warm outputs
# before the first timed command. The harness's CUDA timer tests, the GPU
# novel adversaries (with warm_skip, which skips every warm call after
# validation and computes every novel one) and the torch-eager wrapper's
# CUDA driver test (with _skip_warm). Usage, as run.sh:
#   bash docs/results/2026-12-04-gpu-slots/warm-fill.sh OUT
set -u
W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W"
step() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$W/steps.txt"; }
t0=$(date +%s)
(cd prepare/harness && ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 300s) > "$W/harness-tests.txt" 2>&1
step "harness tests" $? $t0
t0=$(date +%s)
(cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'TestGPUNovelAdversaries' -test.v -test.timeout 300s) > "$W/gpu-novel-tests.txt" 2>&1
step "gpu novel adversaries" $? $t0
t0=$(date +%s)
python3 routes/torch-eager/cuda_test.py --device cuda -j 8 > "$W/torch-cuda-test.txt" 2>&1
step "torch-eager cuda_test.py" $? $t0
