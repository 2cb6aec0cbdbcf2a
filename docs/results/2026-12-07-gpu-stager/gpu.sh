#!/usr/bin/env bash
# On the GPU machine (issue 27, novel rule 3): the stager's first GPU run.
# Stage "tests": the CUDA timer's harness tests (TestCudaTimerVisit now
# stages through the real monitor), the monitor's tests on the fake
# driver, cuda_test.py with the real monitor (--monitor), and every GPU
# test of cmd/tilepipe (shave_novel, sync_shave among them). Stage
# "quick": the gpu-quick cohort through run (capture, prepare, replay,
# audit) with triton, cublas and torch-eager. Build here first (the
# device has no Go):
#   CGO_ENABLED=0 go build -o bin/tilepipe ./cmd/tilepipe
#   mkdir -p bin/gpu && cp /usr/bin/bwrap bin/gpu/
#   for p in cmd/tilepipe prepare/harness internal/telemetry; do
#     CGO_ENABLED=0 go test -c -o bin/gpu/$(basename $p).test ./$p; done
# then, with bin carried:
#   bash docs/results/2026-12-07-gpu-stager/gpu.sh tests|quick OUT RUN
set -u
stage=${1:?tests, quick or all}; W=${2:?output directory}; R=${3:?run directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W" "$R"
PY=$(command -v python3); [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
step() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$W/steps.txt"; }
# Stage "all": both in one call (a machine is scarce), the most telling
# first, each step cut to what is left of BUDGET seconds (default 540):
# the timer's tests, the quick run (kept as quick.tar.xz, a checkpoint for
# testdata/), the wrapper's test, then every GPU test.
if [ "$stage" = all ]; then
  end=$(( $(date +%s) + ${BUDGET:-540} ))
  left() { echo $(( end - $(date +%s) )); }
  t0=$(date +%s)
  (cd prepare/harness && timeout 150 ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 140s) > "$W/harness-tests.txt" 2>&1
  step "harness tests" $? $t0
  BUDGET=$(( $(left) - 200 )) bash "$0" quick "$W" "$R"
  (cd "$R" && tar -cJf "$W/quick.tar.xz" quick/capture quick/prepared quick/replay quick/audit.json quick/audit.md quick/results.md)
  t0=$(date +%s)
  cc -O2 -DTILEPIPE_CUDA -o "$R/cuda-timer" prepare/harness/harness.c -ldl &&
    timeout $(( $(left) > 150 ? 120 : $(left) / 2 )) $PY routes/torch-eager/cuda_test.py --device cuda -j 8 --monitor "$R/cuda-timer" > "$W/torch-cuda-test.txt" 2>&1
  step "torch-eager cuda_test.py --monitor" $? $t0
  t0=$(date +%s)
  (cd cmd/tilepipe && timeout $(( $(left) - 10 )) ../../bin/gpu/tilepipe.test -test.run 'GPU|Cubin|CUDA|Triton' -test.v -test.timeout 400s) > "$W/gpu-tests.txt" 2>&1
  step "gpu tests" $? $t0
  grep -E "^(--- |    gpu_test|ok|FAIL|PASS)" "$W/gpu-tests.txt" > "$W/gpu-tests-summary.txt"
  exit 0
fi
if [ "$stage" = tests ]; then
  t0=$(date +%s)
  (cd prepare/harness && ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 200s) > "$W/harness-tests.txt" 2>&1
  step "harness tests" $? $t0
  t0=$(date +%s)
  (cd internal/telemetry && ../../bin/gpu/telemetry.test -test.v -test.timeout 100s) > "$W/telemetry-tests.txt" 2>&1
  step "telemetry tests" $? $t0
  t0=$(date +%s)
  cc -O2 -DTILEPIPE_CUDA -o "$R/cuda-timer" prepare/harness/harness.c -ldl &&
    $PY routes/torch-eager/cuda_test.py --device cuda -j 8 --monitor "$R/cuda-timer" > "$W/torch-cuda-test.txt" 2>&1
  step "torch-eager cuda_test.py --monitor" $? $t0
  t0=$(date +%s)
  (cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'GPU|Cubin|CUDA|Triton' -test.v -test.timeout 400s) > "$W/gpu-tests.txt" 2>&1
  step "gpu tests" $? $t0
  grep -E "^(--- |    gpu_test|ok|FAIL|PASS)" "$W/gpu-tests.txt" > "$W/gpu-tests-summary.txt"
  exit 0
fi
t0=$(date +%s)
timeout ${BUDGET:-560} bin/tilepipe run --cohort gpu-quick --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --sample-ms 10 --jobs 8 --output "$R/quick" > "$W/quick-run.out" 2> "$W/quick-run.err"
step "gpu-quick run" $? $t0
cp "$R/quick/results.md" "$W/quick-results.md"; cp "$R/quick/audit.md" "$W/quick-audit.md"
# Every visit's idle probes (worst, its CPU wait) and novel samples' span
# against their events.
$PY - "$R/quick" > "$W/quick-visits.txt" <<'PYEOF'
import json, statistics, sys
import pyarrow.ipc as ipc
d = sys.argv[1] + '/replay/blobs/sha256/'
idx = json.load(open(sys.argv[1] + '/replay/index.json'))
man = json.load(open(d + idx['manifests'][0]['digest'].split(':')[1]))
doc = next(json.load(open(d + l['digest'].split(':')[1])) for l in man['layers'] if l['annotations']['org.opencontainers.image.title'] == 'tilepipe.json')
print('novelRule', doc['config'].get('novelRule'))
print('%-5s %-36s %-12s %-7s %7s %9s %9s %12s %12s  %s' % ('visit', 'case', 'route', 'status', 'probes', 'worst_us', 'wait_us', 'novel_span', 'novel_evts', 'reason'))
for v in doc['visits']:
    g = v.get('gpuIdle') or {}
    span = ev = None
    if v.get('samples'):
        t = ipc.open_file(d + v['samples'].split(':')[1]).read_all().to_pylist()
        n = [r for r in t if r['kind'] == 'novel']
        if n:
            span, ev = statistics.median(r['total_ns'] for r in n), statistics.median(r['timer_ns'] for r in n)
    us = lambda x: '-' if x is None else '%.1f' % (x / 1000)
    print('%-5d %-36s %-12s %-7s %7s %9s %9s %12s %12s  %s' % (v['index'], v['case'], v['route'], v['status'], g.get('probes'), us(g.get('worstNs')), us(g.get('worstWaitNs', 0) if g else None), us(span), us(ev), v['reason'][:80]))
PYEOF
step "quick dump" $? $t0
