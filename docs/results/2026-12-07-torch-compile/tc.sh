#!/usr/bin/env bash
# On the GPU machine (issue 29): the torch-compile route through capture,
# prepare, replay and audit on gpu-quick beside torch-eager, mode $MODE
# (max-autotune when unset), within BUDGET seconds. Writes W/tc-*.
set -u
W=${1:?output directory}; R=${2:?run directory}; MODE=${MODE:-max-autotune}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH PYTHONUNBUFFERED=1
mkdir -p "$W" "$R"
t0=$(date +%s)
timeout ${BUDGET:-300} bin/tilepipe run --cohort ${COHORT:-gpu-quick} --routes torch-compile,torch-eager --route-env TILEPIPE_COMPILE_MODE=$MODE \
  --baseline torch-eager --rounds 2 --target 0 --sample-ms ${SAMPLE_MS:-10} --jobs 8 --threads ${THREADS:-15} --output "$R/tc-$MODE" > "$W/tc-$MODE-run.out" 2> "$W/tc-$MODE-run.err"
echo "torch-compile $MODE run: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$W/steps.txt"
for f in results.md audit.md; do [ -f "$R/tc-$MODE/$f" ] && cp "$R/tc-$MODE/$f" "$W/tc-$MODE-$f"; done
# Every build's schedule and reason, from the capture's build records.
find "$R/tc-$MODE" -maxdepth 2 -name '*.json' | head -50 > "$W/tc-$MODE-files.txt"
tar -cJf "$W/tc-$MODE.tar.xz" -C "$R" "tc-$MODE" 2>/dev/null
# The first three tracebacks the visits left on stderr (kept as blobs).
find "$R/tc-$MODE" -type f -size -400k -print0 | xargs -0 grep -l "Traceback" 2>/dev/null | head -3 |
  while read -r f; do echo "== $f"; head -c 100000 "$f"; done > "$W/tc-$MODE-tracebacks.txt"
