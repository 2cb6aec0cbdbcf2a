#!/usr/bin/env bash
# On the GPU machine (issue 27): the cubin chain, the exact pattern against
# a TF32 cuBLAS entry, GPU floors from the ceilings' spread. Stage "tests":
# ptxas 12.8 (Triton's) rebuilds the committed add cubin's PTX (the CI
# fixture internal/launch/testdata/triton-add-2x64-sm90a.rebuilt.cubin),
# then the GPU tests. Stage "chain": gpu-quick through capture, prepare
# (every cubin rebuilt from its PTX), replay and audit. Usage, from the
# repository root with bin/tilepipe (static), bin/gpu/bwrap,
# bin/gpu/tilepipe.test and bin/gpu/harness.test:
#   bash docs/results/2026-12-04-ptxas-chain/run.sh tests|chain OUT RUN
set -u
stage=${1:?tests or chain}
W=${2:?output directory}
R=${3:?run directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W" "$R"
step() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$W/steps.txt"; }
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
if [ "$stage" = tests ]; then
  TP=$($PY -c 'import triton,os; print(os.path.join(os.path.dirname(triton.__file__),"backends/nvidia/bin/ptxas"))')
  "$TP" -lineinfo -v --gpu-name=sm_90a internal/launch/testdata/triton-add-2x64-sm90a.ptx -o "$W/triton-add-2x64-sm90a.rebuilt.cubin" > "$W/rebuild.txt" 2>&1
  echo "ptxas 12.8 rebuild: exit $?" >> "$W/rebuild.txt"; "$TP" --version >> "$W/rebuild.txt"
  t0=$(date +%s)
  (cd prepare/harness && ../../bin/gpu/harness.test -test.run 'TestCudaTimer' -test.v -test.timeout 200s) > "$W/harness-tests.txt" 2>&1
  step "harness tests" $? $t0
  t0=$(date +%s)
  (cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'TestCubinPrepared|TestGPUCubinChain|TestGPUTF32AsStrict|TestGPUNovelAdversaries|TestGPUSideStream|TestGPUAdversaries' -test.v -test.timeout 420s) > "$W/gpu-tests.txt" 2>&1
  step "gpu tests" $? $t0
  grep -E "^(=== RUN|--- |    gpu_test|ok|FAIL|PASS)" "$W/gpu-tests.txt" | grep -v "=== RUN" > "$W/gpu-tests-summary.txt"
else
  t0=$(date +%s)
  bin/tilepipe run --cohort docs/results/2026-12-04-ptxas-chain/chain.json --routes triton,cublas,torch-eager --baseline torch-eager --rounds 2 --target 0 --sample-ms 10 --jobs 8 --output "$R/quick" > "$W/quick-run.out" 2> "$W/quick-run.err"
  step "gpu-quick run" $? $t0
  cp "$R/quick/results.md" "$W/quick-results.md"; cp "$R/quick/audit.md" "$W/quick-audit.md"
fi
if [ "$stage" = chain ]; then
  # The sessions' ceilings and GPU floors, and each cubin entry's chain.
  $PY - "$R/quick" > "$W/quick-floors-chain.json" <<'PYEOF'
import json, sys
def doc(stage, title):
    d = sys.argv[1] + '/' + stage
    idx = json.load(open(d + '/index.json'))
    man = json.load(open(d + '/blobs/sha256/' + idx['manifests'][0]['digest'].split(':')[1]))
    for l in man['layers']:
        if l['annotations']['org.opencontainers.image.title'] == title:
            return json.load(open(d + '/blobs/sha256/' + l['digest'].split(':')[1]))
r, p = doc('replay', 'tilepipe.json'), doc('prepared', 'tilepipe.json')
print(json.dumps({"sessions": [{"gpu": s.get("gpu"), "floors": [f for f in s.get("floors", []) if f.get("device") == "cuda"]} for s in r["sessions"]],
                  "chains": [{"case": e["case"], "route": e["route"], "status": e["status"], "reason": e["reason"], "chain": e.get("chain")} for e in p["entries"] if e["kind"] == "cubin"]}, indent=1))
PYEOF
  du -sb "$R/quick"/* > "$W/quick-bytes.txt"
fi
