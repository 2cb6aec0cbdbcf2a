#!/usr/bin/env bash
# On the GPU machine (issue 11): torch-eager on CUDA. (1) cuda_test.py,
# whole --device cuda visits of every op and the test ops; (2) the chain
# for cohort.json with triton, cublas and torch-eager; (3) the same cases
# timed by triton.testing.do_bench and a warm event loop. Usage, from the
# repository root, with bin/tilepipe built static and bin/gpu/bwrap:
#   bash docs/results/2026-12-01-torch-eager-cuda/run.sh OUT
set -u
D=$(dirname "$0") W=${1:?output directory}
mkdir -p "$W"
t0=$(date +%s)
python3 routes/torch-eager/cuda_test.py -j 8 > "$W/cuda_test.txt" 2>&1
echo "cuda_test.py: exit $? in $(( $(date +%s) - t0 )) s"; tail -n 5 "$W/cuda_test.txt"
bash docs/results/2026-12-01-gpu-chain/run.sh "$D/cohort.json" triton,cublas,torch-eager "$W/chain" --baseline torch-eager
python3 "$D/do_bench.py" > "$W/do_bench.md" 2>&1; cat "$W/do_bench.md"
