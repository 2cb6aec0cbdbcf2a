#!/usr/bin/env bash
# On the GPU machine (issue 11): capture cuda add cases with the triton
# route, check every launch manifest capture accepted by launching its
# cubin from plain C (prepare/harness/cuda/probe.c) on x = i, y = 2i, then
# prepare (cubin rows stay unsupported until the CUDA timer exists).
# Usage, from the repository root, with bin/tilepipe built static:
#   bash docs/results/2026-12-01-triton-capture/run.sh WORKDIR
set -u
W=${1:?work directory}
mkdir -p "$W"
TP=$(pwd)/bin/tilepipe
cat > "$W/cohort.json" <<'JSON'
{"schema": 1, "name": "cuda-add", "cases": [
 {"op": "add", "dims": {"M": 1, "N": 7}, "seed": 1, "device": "cuda"},
 {"op": "add", "dims": {"M": 1000, "N": 1000}, "seed": 2, "device": "cuda"},
 {"op": "add", "dims": {"M": 37, "N": 1001}, "seed": 3, "device": "cuda"},
 {"op": "add", "dims": {"M": 4096, "N": 4096}, "seed": 4, "device": "cuda"},
 {"op": "add", "dims": {"M": 512, "N": 1000}, "dtype": "bf16", "seed": 5, "device": "cuda"},
 {"op": "add", "dims": {"M": 64, "N": 64}, "seed": 6}]}
JSON
$TP capture --cohort "$W/cohort.json" --routes "" --route-exec routes/triton/route --no-sandbox --output "$W/cap" 2>"$W/cap.err"
echo "capture exit $?"; tail -n 3 "$W/cap.err"
$TP prepare --capture "$W/cap" --output "$W/prep" --no-sandbox 2>"$W/prep.err"
echo "prepare exit $?"; tail -n 1 "$W/prep.err"
gcc -O2 -o "$W/probe" prepare/harness/cuda/probe.c -ldl -lm || exit 1
python3 - "$W" <<'PY'
import json, os, subprocess, sys
w = sys.argv[1]
store = os.path.join(w, "cap")
blob = lambda d: os.path.join(store, "blobs", "sha256", d.split(":")[1])
idx = json.load(open(os.path.join(store, "index.json")))
man = json.load(open(blob(idx["manifests"][0]["digest"])))
doc = next(l for l in man["layers"] if l["annotations"]["org.opencontainers.image.title"] == "tilepipe.json")
doc = json.load(open(blob(doc["digest"])))
print("| case | build | reason | launch from C |")
print("|---|---|---|---|")
for c in doc["cases"]:
    cid, b = c["case"]["id"], c["builds"][0]
    res = ""
    if b["status"] == "built" and c["case"]["dtype"] == "f32":
        f = {x["role"]: x for x in b["files"]}
        m = json.load(open(blob(f["manifest"]["digest"])))
        d = os.path.join(w, "launch-" + cid)
        os.makedirs(d, exist_ok=True)
        os.system("cp %s %s/add.cubin" % (blob(f["cubin"]["digest"]), d))
        n = next(int(p["value"]) for p in m["params"] if p["kind"] == "i32")
        lines = ["kernel " + m["kernel"], "grid %d %d %d" % tuple(m["grid"]), "block %d %d %d" % tuple(m["block"]),
                 "shared %d" % m["sharedBytes"], "n %d" % n]
        names = iter(["x", "y", "out"])
        for p in m["params"]:
            lines.append({"tensor": lambda: "param ptr " + next(names), "i32": lambda: "param i32 %s" % p["value"],
                          "scratch": lambda: "param scratch u64"}[p["kind"]]())
        open(os.path.join(d, "add.launch"), "w").write("\n".join(lines) + "\n")
        r = subprocess.run([os.path.join(w, "probe"), d], capture_output=True, text=True)
        res = (r.stdout + r.stderr).strip().replace("\n", "; ")
    print("| %s | %s | %s | %s |" % (cid, b["status"], b["reason"], res))
PY
