#!/usr/bin/env bash
# On the GPU machine (issue 11): NVML telemetry. (1) the CUDA timer's
# --telemetry by hand: its first line, readings idle and while another
# process holds a CUDA context, and what 1000 readings cost; (2) gpu-quick
# through `tilepipe run` with every GPU route and graph samples (the
# committed testdata/gpu-checkpoint); (3) the GPU adversary tests. Usage,
# from the repository root, with bin/tilepipe built static, bin/gpu/bwrap
# and bin/gpu/tilepipe.test (go test -c ./cmd/tilepipe):
#   bash docs/results/2026-12-01-telemetry/run.sh OUT
set -u
W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W"
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
gcc -std=gnu11 -O2 -DTILEPIPE_CUDA -o "$W/cuda-timer" prepare/harness/harness.c -ldl
{
  echo "## idle: first line and two readings"
  printf 'r\nr\n' | "$W/cuda-timer" --telemetry
  echo "## while a torch process holds a context"
  python3 -c "import torch,time; x=torch.ones(1,device='cuda'); torch.cuda.synchronize(); time.sleep(8)" &
  sleep 5
  printf 'r\n' | "$W/cuda-timer" --telemetry
  wait
  echo "## 1000 readings"
  t0=$(date +%s%N)
  for i in $(seq 1000); do echo r; done | "$W/cuda-timer" --telemetry | tail -n 1
  echo "1000 readings in $(( ($(date +%s%N) - t0) / 1000000 )) ms (with the process start)"
} > "$W/telemetry.txt" 2>&1
cat "$W/telemetry.txt"
rm -f "$W/cuda-timer"
t0=$(date +%s)
bin/tilepipe run --cohort gpu-quick --routes triton,cublas,torch-eager --baseline torch-eager --graph-batch 8 --jobs 8 --output "$W/gpu-quick" > "$W/gpu-quick.out" 2> "$W/gpu-quick.err"
echo "gpu-quick: exit $? in $(( $(date +%s) - t0 )) s"
tail -n 5 "$W/gpu-quick.err"; head -n 40 "$W/gpu-quick/audit.md"
t0=$(date +%s)
(cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'TestGPUAdversaries|TestGPUHealthCheck' -test.v -test.timeout 300s) > "$W/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? in $(( $(date +%s) - t0 )) s"
grep -E '^(=== RUN|--- |PASS|FAIL|ok)|caught|reason' "$W/gpu-tests.txt" | head -40
