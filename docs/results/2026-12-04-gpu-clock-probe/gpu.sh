#!/usr/bin/env bash
# On the GPU machine (issue 27): the channel-bounded clock gap, the idle
# probe, and the stager's open questions. Stage "tests": run2.sh's
# probes, the CUDA timer's harness tests, every GPU test of cmd/tilepipe
# (the shaved-events and background-work adversaries among them). Stage
# "chain": the 7-case cohort of docs/results/2026-12-04-ptxas-chain with
# every visit's idle probes and clock gaps. Usage from the repository root
# with bin/tilepipe, bin/gpu/bwrap, bin/gpu/tilepipe.test and
# bin/gpu/harness.test:
#   bash docs/results/2026-12-04-gpu-clock-probe/gpu.sh tests|chain OUT RUN
set -u
stage=${1:?tests or chain}; W=${2:?output directory}; R=${3:?run directory}
D=docs/results/2026-12-04-gpu-clock-probe
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W" "$R"
PY=$(command -v python3); [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
step() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$W/steps.txt"; }
if [ "$stage" = tests ]; then
  t0=$(date +%s); bash $D/run2.sh "$W"; step "probes" $? $t0
  t0=$(date +%s)
  (cd prepare/harness && ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 200s) > "$W/harness-tests.txt" 2>&1
  step "harness tests" $? $t0
  t0=$(date +%s)
  (cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'GPU|Cubin|CUDA|Triton' -test.v -test.timeout 440s) > "$W/gpu-tests.txt" 2>&1
  step "gpu tests" $? $t0
  grep -E "^(--- |    gpu_test|ok|FAIL|PASS)" "$W/gpu-tests.txt" > "$W/gpu-tests-summary.txt"
  exit 0
fi
t0=$(date +%s)
bin/tilepipe run --cohort docs/results/2026-12-04-ptxas-chain/chain.json --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --sample-ms 10 --jobs 8 --output "$R/chain" > "$W/chain-run.out" 2> "$W/chain-run.err"
step "chain run" $? $t0
cp "$R/chain/results.md" "$W/chain-results.md"; cp "$R/chain/audit.md" "$W/chain-audit.md"
$PY - "$R/chain" > "$W/chain-visits.txt" <<'PYEOF'
# Per visit: its idle probes, its slowest empty sample, its smallest and
# median batch gap (replay's span - the CUDA events), and visit.CheckGap's
# bound on the median gap.
import json, statistics, sys
import pyarrow.ipc as ipc
d = sys.argv[1] + '/replay/blobs/sha256/'
idx = json.load(open(sys.argv[1] + '/replay/index.json'))
man = json.load(open(d + idx['manifests'][0]['digest'].split(':')[1]))
doc = next(json.load(open(d + l['digest'].split(':')[1])) for l in man['layers'] if l['annotations']['org.opencontainers.image.title'] == 'tilepipe.json')
worst, ratio = [], []
print('%-5s %-40s %-12s %-7s %7s %10s %10s %10s %10s %10s  %s' % ('visit', 'case', 'route', 'status', 'probes', 'worst_us', 'empty_max', 'bgap_min', 'bgap_med', 'allowed', 'reason'))
for v in doc['visits']:
    g = v.get('gpuIdle') or {}
    empty = bgap = bmed = None
    if v.get('samples'):
        t = ipc.open_file(d + v['samples'].split(':')[1]).read_all().to_pylist()
        es = [r['total_ns'] for r in t if r['kind'] == 'empty']
        bs = [r['total_ns'] - r['timer_ns'] for r in t if r['kind'] == 'batch']
        empty, bgap, bmed = (max(es) if es else None), (min(bs) if bs else None), (statistics.median(bs) if bs else None)
    allowed = min(2 * empty + 200_000, 1_000_000) if empty is not None else None
    if g.get('worstNs'):
        worst.append(g['worstNs'])
    if bmed is not None:
        ratio.append(bmed / allowed)
    us = lambda x: '-' if x is None else '%.1f' % (x / 1000)
    print('%-5d %-40s %-12s %-7s %7s %10s %10s %10s %10s %10s  %s' % (v['index'], v['case'], v['route'], v['status'], g.get('probes'), us(g.get('worstNs')), us(empty), us(bgap), us(bmed), us(allowed), v['reason'][:70]))
worst.sort(); ratio.sort()
if worst:
    print('worst probe per visit (us): min %.1f median %.1f max %.1f over %d visits' % (worst[0] / 1e3, worst[len(worst) // 2] / 1e3, worst[-1] / 1e3, len(worst)))
if ratio:
    print('median batch gap / its bound: min %.2f median %.2f max %.2f over %d visits' % (ratio[0], ratio[len(ratio) // 2], ratio[-1], len(ratio)))
PYEOF
step "chain dump" $? $t0
