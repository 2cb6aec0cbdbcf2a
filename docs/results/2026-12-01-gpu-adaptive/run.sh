#!/usr/bin/env bash
# On the GPU machine (issue 12 on the H200): gpu-quick through `tilepipe
# run` at the default adaptive target (±1.5%) with a 10 s budget per row,
# and --threads 4 so the session keeps replay off the visits' cores (16
# cores there), then the split and every visit's mask from the document.
# Usage, from the repository root, with bin/tilepipe built static and
# bin/gpu/bwrap:
#   bash docs/results/2026-12-01-gpu-adaptive/run.sh OUT
set -u
W=${1:?output directory}
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
mkdir -p "$W"
nproc > "$W/nproc.txt"
t0=$(date +%s)
bin/tilepipe run --cohort gpu-quick --routes triton,cublas,torch-eager --baseline torch-eager --threads 4 --budget-s 10 \
  --output "$W/run" > "$W/run.out" 2> "$W/run.err"
echo "run: exit $? in $(( $(date +%s) - t0 )) s" | tee "$W/steps.txt"
cp "$W/run/results.md" "$W/run/audit.md" "$W/" 2>/dev/null
python3 - "$W/run/replay" > "$W/cores.txt" <<'PY'
import json, sys, collections
d = sys.argv[1]
idx = json.load(open(d + "/index.json"))
m = json.load(open(d + "/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
doc = next(json.load(open(d + "/blobs/sha256/" + l["digest"].split(":")[1])) for l in m["layers"]
           if l["annotations"].get("org.opencontainers.image.title") == "tilepipe.json")
for s in doc["sessions"]:
    print("session", s["index"], json.dumps(s.get("cores")))
print("visit masks:", dict(collections.Counter(",".join(map(str, v.get("cores") or [])) for v in doc["visits"])))
print("stops:", json.dumps(doc.get("stops")))
PY
cat "$W/cores.txt"; tail -n 3 "$W/run.err"
