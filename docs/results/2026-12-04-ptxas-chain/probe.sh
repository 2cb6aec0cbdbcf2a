#!/usr/bin/env bash
# On the GPU machine (issue 27): how Triton 3.6 turns PTX into a cubin,
# and whether ptxas rebuilds the committed checkpoint's cubins byte for
# byte from their PTX; then the new CUDA timer's ceilings with their
# spread. Usage, from the repository root with bin/tilepipe (static):
#   bash docs/results/2026-12-04-ptxas-chain/probe.sh OUT
set -u
W=${1:?output directory}
mkdir -p "$W"
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
PY=$(command -v python3)
for p in /opt/torch/.venv/bin/python3 /opt/torch/.venv/bin/python; do [ -x "$p" ] && PY=$p && break; done
$PY - > "$W/triton-ptxas.txt" 2>&1 <<'PYEOF'
import inspect, triton, subprocess
print("triton", triton.__version__)
from triton.backends.nvidia import compiler as c
try:
    print(inspect.getsource(c.CUDABackend.make_cubin))
except Exception as e:
    print("make_cubin source:", e)
for name in ("get_ptxas", "get_ptxas_version"):
    f = getattr(c, name, None)
    if f:
        try:
            print(name, f() if name != "get_ptxas" else f())
        except Exception as e:
            print(name, "failed", e)
try:
    from triton import knobs
    print("knobs.nvidia.ptxas", knobs.nvidia.ptxas.path if hasattr(knobs.nvidia.ptxas, "path") else knobs.nvidia.ptxas)
except Exception as e:
    print("knobs:", e)
PYEOF
ls -la /usr/local/cuda/bin/ptxas /usr/local/cuda/bin/cuobjdump /usr/local/cuda/bin/nvdisasm >> "$W/triton-ptxas.txt" 2>&1
/usr/local/cuda/bin/ptxas --version >> "$W/triton-ptxas.txt" 2>&1
TP=$($PY -c 'import triton,os; print(os.path.join(os.path.dirname(triton.__file__),"backends/nvidia/bin/ptxas"))')
echo "triton ptxas: $TP" >> "$W/triton-ptxas.txt"; "$TP" --version >> "$W/triton-ptxas.txt" 2>&1
# Rebuild every triton cubin of the committed checkpoint from its PTX.
$PY - "$TP" > "$W/rebuild.txt" 2>&1 <<'PYEOF'
import json, subprocess, sys, os, hashlib, tempfile, itertools
tp = sys.argv[1]
d = 'testdata/gpu-checkpoint/capture'
idx = json.load(open(d + '/index.json'))
man = json.load(open(d + '/blobs/sha256/' + idx['manifests'][0]['digest'].split(':')[1]))
names = {l['annotations']['org.opencontainers.image.title']: d + '/blobs/sha256/' + l['digest'].split(':')[1] for l in man['layers']}
pairs = sorted(k[:-len('kernel.ptx')] for k in names if k.endswith('/triton/kernel.ptx'))
tools = [tp, '/usr/local/cuda/bin/ptxas']
variants = [['-lineinfo', '-v', '--gpu-name=sm_90a'], ['-lineinfo', '--gpu-name=sm_90a'], ['--gpu-name=sm_90a'], ['-lineinfo', '-v', '--gpu-name=sm_90']]
for pre in pairs:
    ptx, cubin = names[pre + 'kernel.ptx'], names[pre + 'kernel.cubin']
    want = open(cubin, 'rb').read()
    for t, v in itertools.product(tools, variants):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, 'k.cubin')
            r = subprocess.run([t] + v + [ptx, '-o', out], capture_output=True, text=True)
            got = open(out, 'rb').read() if r.returncode == 0 else b''
            print(pre, os.path.basename(os.path.dirname(os.path.dirname(t))) if 'triton' in t else 'cuda', ' '.join(v), 'rc', r.returncode, 'bytes', len(got), 'want', len(want), 'EQUAL' if got == want else 'differ', r.stderr.strip()[:200].replace('\n', ' | '))
PYEOF
# The new timer's ceilings, with their spread: prepare the committed capture.
bin/tilepipe prepare --capture testdata/gpu-checkpoint/capture --output /tmp/probe-prep > "$W/prepare.txt" 2>&1
echo "prepare exit $?" >> "$W/prepare.txt"
T=/tmp/probe-cuda-timer
$PY - "$T" <<'PYEOF'
import json, sys, shutil, os
d = '/tmp/probe-prep'
idx = json.load(open(d + '/index.json'))
man = json.load(open(d + '/blobs/sha256/' + idx['manifests'][0]['digest'].split(':')[1]))
for l in man['layers']:
    if l['annotations']['org.opencontainers.image.title'] == 'harness/cuda-timer':
        shutil.copy(d + '/blobs/sha256/' + l['digest'].split(':')[1], sys.argv[1]); os.chmod(sys.argv[1], 0o755)
PYEOF
CUB=$(ls /usr/local/cuda/lib64/libcublas.so 2>/dev/null || find / -name libcublas.so -print -quit 2>/dev/null)
for i in 1 2 3; do "$T" --ceilings "$CUB" >> "$W/ceilings.txt" 2>&1; done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$W/ceilings.txt" 2>&1
