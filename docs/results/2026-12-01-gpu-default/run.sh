#!/usr/bin/env bash
# On the GPU machine (issue 11): the Done-when run. The telemetry monitor
# by hand first (its first line and two readings), then the whole chain
# through `tilepipe run` for gpu-default with every GPU route, graph
# samples and two rounds. Usage, from the repository root, with
# bin/tilepipe built static and bin/gpu/bwrap:
#   bash docs/results/2026-12-01-gpu-default/run.sh OUT
set -u
W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv > "$W/gpu.csv" 2>&1
gcc -std=gnu11 -O2 -DTILEPIPE_CUDA -o /tmp/cuda-timer prepare/harness/harness.c -ldl
printf 'r\nr\n' | /tmp/cuda-timer --telemetry > "$W/telemetry.txt" 2>&1
cat "$W/telemetry.txt"
t0=$(date +%s)
bin/tilepipe run --cohort gpu-default --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --graph-batch 32 --sample-ms 10 --jobs 12 --output "$W/run" > "$W/run.out" 2> "$W/run.err"
echo "tilepipe run: exit $? in $(( $(date +%s) - t0 )) s" | tee "$W/steps.txt"
