#!/usr/bin/env bash
# On the GPU machine (issue 29): the wrapper's compiled visits, driven as
# replay drives them (cuda_test.py --compile MODE, the real monitor
# staging every novel sample), within BUDGET seconds. Writes W/.
set -u
W=${1:?output directory}; R=${2:?run directory}; MODE=${MODE:-max-autotune}
PY=$(command -v python3); [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
export PYTHONUNBUFFERED=1
mkdir -p "$W" "$R"
t0=$(date +%s)
cc -O2 -DTILEPIPE_CUDA -o "$R/cuda-timer" prepare/harness/harness.c -ldl &&
  timeout ${BUDGET:-300} $PY routes/torch-eager/cuda_test.py --device cuda -j 8 --monitor "$R/cuda-timer" --compile $MODE > "$W/cuda-test-compile-$MODE.txt" 2>&1
echo "cuda_test.py --compile $MODE: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$W/steps.txt"
