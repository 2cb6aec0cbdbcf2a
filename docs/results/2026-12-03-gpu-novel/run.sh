#!/usr/bin/env bash
# On the GPU machine (issue 26): visit protocol 4 on the GPU. Stage
# "tests": the CUDA timer's and the torch wrapper's novel samples, the GPU
# adversaries, then gpu-quick through `tilepipe run` (the committed
# testdata/gpu-checkpoint). Stage "default": gpu-default, three routes,
# two rounds. Usage, from the repository root, with bin/tilepipe built
# static, bin/gpu/bwrap and the test binaries bin/gpu/tilepipe.test
# (go test -c ./cmd/tilepipe) and bin/gpu/harness.test (./prepare/harness):
#   bash docs/results/2026-12-03-gpu-novel/run.sh tests|default OUT
#   bash docs/results/2026-12-03-gpu-novel/run.sh a|b|a2 OUT RUN (gpu-default-STAGE.json)
set -u
stage=${1:?tests, default, a or b}
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
elif [ "$stage" = default ]; then
  t0=$(date +%s)
  bin/tilepipe run --cohort gpu-default --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --graph-batch 32 --sample-ms 10 --jobs 12 --output "$W/run" > "$W/run.out" 2> "$W/run.err"
  step "gpu-default run" $? $t0
else
  # gpu-default in two halves (gpu-default-a.json, -b.json: its cases
  # unchanged), each one device call: the whole cohort's replay under
  # protocol 4 does not fit one. Stages stay in RUN; the tables come to W.
  here=$(dirname "$0")
  R=${3:?run directory for the stages}
  t0=$(date +%s)
  bin/tilepipe run --cohort "$here/gpu-default-$stage.json" --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --graph-batch 32 --sample-ms 10 --jobs 12 --output "$R" > "$W/$stage-run.out" 2> "$W/$stage-run.err"
  step "gpu-default-$stage run" $? $t0
  cp "$R/results.md" "$W/$stage-results.md"; cp "$R/audit.md" "$W/$stage-audit.md"; cp "$R/audit.json" "$W/$stage-audit.json"
  du -sb "$R"/* > "$W/$stage-bytes.txt"
  # the replay's largest blobs (its tensors; the stage is an OCI layout)
  find "$R/replay" -type f -size +20M -printf '%s %P\n' | sort -n | tail -12 >> "$W/$stage-bytes.txt"
fi
