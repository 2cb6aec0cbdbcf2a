#!/usr/bin/env bash
# On the GPU machine: the GPU adversaries (cmd/tilepipe TestGPUAdversaries,
# routes/testdata/triton-adversary), then skip_unpoisoned (a kernel that
# works only while its output holds NaN) through the whole chain on add
# 2048x2048, beside the honest kernel. Usage from the repository root, with bin/tilepipe and
# bin/gpu/{bwrap,tilepipe.test} built here:
#   bash docs/results/2026-12-01-gpu-adversaries/run.sh OUT
set -u
W=${1:?output directory}
mkdir -p "$W"
export PATH=$(pwd)/bin/gpu:$PATH TILEPIPE_ROUTES=$(pwd)/routes
(cd cmd/tilepipe && ../../bin/gpu/tilepipe.test -test.run 'TestGPUAdversaries|TestCubinPrepared' -test.v) > "$W/adversaries.txt" 2>&1
grep -E "^(=== RUN|--- |    gpu_test|PASS|FAIL|ok)" "$W/adversaries.txt"
cat > "$W/cohort.json" <<'JSON'
{"schema": 1, "rounds": 2, "cases": [{"op": "add", "dims": {"M": 2048, "N": 2048}, "seed": 7, "device": "cuda"}]}
JSON
TP=$(pwd)/bin/tilepipe
# The honest kernel and the cheat in one replay: a paired ratio.
$TP capture --cohort "$W/cohort.json" --routes triton --route-exec "$(pwd)/routes/testdata/triton-adversary/route" \
  --route-env TILEPIPE_TEST_GPU_ADVERSARY=skip_unpoisoned --output "$W/capture" 2> "$W/capture.err" >/dev/null
echo "capture exit $?"
$TP prepare --capture "$W/capture" --output "$W/prepared" 2> "$W/prepare.err" >/dev/null
echo "prepare exit $?"
$TP replay --prepared "$W/prepared" --output "$W/replay" --baseline triton > "$W/replay.out" 2> "$W/replay.err"
echo "replay exit $?"; grep -E "^\| add" "$W/replay.out"
$TP audit --capture "$W/capture" --prepared "$W/prepared" --replay "$W/replay" --output "$W/audit.json" > /dev/null 2> "$W/audit.err"
echo "audit exit $?"; tail -n 1 "$W/audit.err"
