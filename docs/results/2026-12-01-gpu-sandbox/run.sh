#!/usr/bin/env bash
# On the GPU machine (issue 11): can a timer reach the GPU from inside the
# bubblewrap sandbox replay puts every visit in? Builds the triton route's
# add for one cuda case, then launches its cubin with the C probe: without
# a sandbox, in the sandbox with only the GPU's device nodes added (the
# issue's rule), in the sandbox without them (must fail), and in a
# visit-like sandbox that shows only the probe, the kernel and the
# directories of the libraries it maps (libc, libcuda).
# Usage, from the repository root, with Debian's bwrap carried at bin/gpu/bwrap:
#   bash docs/results/2026-12-01-gpu-sandbox/run.sh /tmp/g
set -u
W=${1:?work directory}
B=$(pwd)/bin/gpu/bwrap
mkdir -p "$W/w" "$W/k"
echo "## the machine"
uname -r; ls -l /dev/nvidia* 2>&1
cuda=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}'); echo "libcuda: $cuda -> $(readlink -f "$cuda")"
$B --version
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
json.dump({"id": "add-1000x1000-cuda", "op": "add", "dims": {"M": 1000, "N": 1000}, "dtype": "f32", "pattern": "normal", "seed": 2,
           "policy": "strict", "device": "cuda", "threads": 1,
           "signature": [{"name": n, "role": r, "dtype": "f32", "shape": [1000, 1000]} for n, r in (("A", "input"), ("B", "input"), ("C", "output"))]},
          open(w + "/case.json", "w"))
PY
routes/triton/route build --case "$W/case.json" --workdir "$W/w" | head -c 300; echo
python3 - "$W" <<'PY'
import json, shutil, sys
w = sys.argv[1]
m = json.load(open(w + "/w/launch.json"))
n = next(int(p["value"]) for p in m["params"] if p["kind"] == "i32")
names = iter(["x", "y", "out"])
lines = ["kernel " + m["kernel"], "grid %d %d %d" % tuple(m["grid"]), "block %d %d %d" % tuple(m["block"]), "shared %d" % m["sharedBytes"], "n %d" % n]
for p in m["params"]:
    lines.append({"tensor": lambda: "param ptr " + next(names), "i32": lambda: "param i32 %s" % p["value"], "scratch": lambda: "param scratch u64"}[p["kind"]]())
open(w + "/k/add.launch", "w").write("\n".join(lines) + "\n")
shutil.copy(w + "/w/kernel.cubin", w + "/k/add.cubin")
PY
gcc -O2 -o "$W/probe" prepare/harness/cuda/probe.c -ldl -lm || exit 1
devs=(); for d in /dev/nvidia*; do [ -c "$d" ] && devs+=(--dev-bind "$d" "$d"); done
ns=(--unshare-all --die-with-parent --new-session)
echo; echo "## 1. no sandbox"
"$W/probe" "$W/k"; echo "exit $?"
echo; echo "## 2. sandbox (system read-only), GPU device nodes added: ${devs[*]}"
$B "${ns[@]}" --ro-bind / / --proc /proc --dev /dev "${devs[@]}" --chdir / -- "$W/probe" "$W/k"; echo "exit $?"
echo; echo "## 3. sandbox (system read-only), no GPU device nodes"
$B "${ns[@]}" --ro-bind / / --proc /proc --dev /dev --chdir / -- "$W/probe" "$W/k"; echo "exit $?"
echo; echo "## 4. visit-like sandbox: only the probe, the kernel and the libraries' directories"
libs=(); for f in "$(readlink -f "$cuda")" $(ldd "$W/probe" | awk '/=>/{print $3} /ld-linux/{print $1}'); do
  d=$(dirname "$(readlink -f "$f")"); case " ${libs[*]} " in *" $d "*) ;; *) libs+=("$d");; esac; done
binds=(); for d in "${libs[@]}"; do binds+=(--ro-bind "$d" "$d"); done
echo "library directories: ${libs[*]}"
$B "${ns[@]}" --proc /proc --dev /dev --tmpfs /tmp "${devs[@]}" "${binds[@]}" \
  --ro-bind /lib64 /lib64 --symlink usr/lib /lib --ro-bind "$W/probe" /visit/probe --ro-bind "$W/k" /visit/k --chdir /visit -- /visit/probe /visit/k; echo "exit $?"
