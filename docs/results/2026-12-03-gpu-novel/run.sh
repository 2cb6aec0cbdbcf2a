#!/usr/bin/env bash
# On the GPU machine (issue 26): visit protocol 4 on the GPU. Stage
# "tests": the CUDA timer's and the torch wrapper's novel samples, the GPU
# adversaries, then gpu-quick through `tilepipe run` (the committed
# testdata/gpu-checkpoint). Stage "default": gpu-default, three routes,
# two rounds. Usage, from the repository root, with bin/tilepipe built
# static, bin/gpu/bwrap and the test binaries bin/gpu/tilepipe.test
# (go test -c ./cmd/tilepipe) and bin/gpu/harness.test (./prepare/harness):
#   bash docs/results/2026-12-03-gpu-novel/run.sh tests|default OUT
set -u
stage=${1:?tests or default}
W=${2:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W"
step() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$W/steps.txt"; }
if [ "$stage" = tests ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv > "$W/gpu.csv" 2>&1
  t0=$(date +%s)
  (cd prepare/harness && ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 300s) > "$W/harness-tests.txt" 2>&1
  step "harness tests" $? $t0
  t0=$(date +%s)
  python3 routes/torch-eager/cuda_test.py --device cuda -j 8 > "$W/torch-cuda-test.txt" 2>&1
  step "torch-eager cuda_test.py" $? $t0
  t0=$(date +%s)
  (cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'TestGPUAdversaries|TestGPUNovelAdversaries|TestGPUSideStream|TestGPUHealthCheck' -test.v -test.timeout 400s) > "$W/gpu-tests.txt" 2>&1
  step "gpu tests" $? $t0
  t0=$(date +%s)
  bin/tilepipe run --cohort gpu-quick --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --graph-batch 8 --jobs 8 --output "$W/gpu-quick" > "$W/gpu-quick.out" 2> "$W/gpu-quick.err"
  step "gpu-quick run" $? $t0
else
  t0=$(date +%s)
  bin/tilepipe run --cohort gpu-default --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --graph-batch 32 --sample-ms 10 --jobs 12 --output "$W/run" > "$W/run.out" 2> "$W/run.err"
  step "gpu-default run" $? $t0
fi
