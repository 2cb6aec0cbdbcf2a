#!/usr/bin/env bash
# On the GPU machine (issue 26, step 7): novel rule 2, GPU novel slots
# in a 256 MiB budget and judged calls bounded by outputs and oracle work.
# Stage "tests": the CUDA timer's tests, the GPU adversaries, and the two
# large cases of diag-n1 (add 1024², gemm 1024³) whose novel samples were
# one launch under rule 1, their samples exported. Stages a and b:
# gpu-default in the halves of docs/results/2026-12-03-gpu-novel (cases
# unchanged), three routes, two rounds, as there. Usage, from the
# repository root, with bin/tilepipe built static, bin/gpu/bwrap and the
# test binaries bin/gpu/tilepipe.test (go test -c ./cmd/tilepipe) and
# bin/gpu/harness.test (./prepare/harness):
#   bash docs/results/2026-12-04-gpu-slots/run.sh tests|a|b OUT RUN
set -u
stage=${1:?tests, a or b}
W=${2:?output directory}
R=${3:?run directory for the stages}
prev=docs/results/2026-12-03-gpu-novel
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W" "$R"
step() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$W/steps.txt"; }
if [ "$stage" = tests ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv > "$W/gpu.csv" 2>&1
  t0=$(date +%s)
  (cd prepare/harness && ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 300s) > "$W/harness-tests.txt" 2>&1
  step "harness tests" $? $t0
  t0=$(date +%s)
  (cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'TestGPUAdversaries|TestGPUNovelAdversaries|TestGPUSideStream|TestGPUHealthCheck' -test.v -test.timeout 400s) > "$W/gpu-tests.txt" 2>&1
  step "gpu tests" $? $t0
  t0=$(date +%s)
  bin/tilepipe run --cohort $prev/diag-n1.json --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --sample-ms 10 --jobs 8 --output "$R/diag" > "$W/diag.out" 2> "$W/diag.err"
  step "diag-n1 run" $? $t0
  bin/tilepipe export --replay "$R/diag/replay" --output "$R/diag-export" >> "$W/diag.err" 2>&1
  cp "$R/diag/results.md" "$W/diag-results.md"; cp "$R/diag/audit.md" "$W/diag-audit.md"; cp "$R/diag-export/samples.csv" "$W/diag-samples.csv"
  du -sb "$R/diag"/* > "$W/diag-bytes.txt"
else
  t0=$(date +%s)
  bin/tilepipe run --cohort "$prev/gpu-default-$stage.json" --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --graph-batch 32 --sample-ms 10 --jobs 12 --output "$R/$stage" > "$W/$stage-run.out" 2> "$W/$stage-run.err"
  step "gpu-default-$stage run" $? $t0
  cp "$R/$stage/results.md" "$W/$stage-results.md"; cp "$R/$stage/audit.md" "$W/$stage-audit.md"; cp "$R/$stage/audit.json" "$W/$stage-audit.json"
  du -sb "$R/$stage"/* > "$W/$stage-bytes.txt"
fi
