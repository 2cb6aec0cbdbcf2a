"""torch.compile probe for issue 29 (run on the GPU machine, torch 2.x).

    python3 probe.py build DIR OP MODE STYLE   # compile, list what was written
    python3 probe.py replay DIR OP MODE STYLE  # a fresh process on a copy

OP: add (64x1000), addbig (4096x4096), softmax (2048x4096), gemm (1024^3), f32.
MODE: torch.compile mode. STYLE: mut (f(A, B, C) writes C with copy_) or
pure (C.copy_(f(A, B)) outside the compiled function). Prints one JSON
line: compile and first-call seconds, inductor counters, cudagraph
skips, the per-call median of 200 calls (CUDA events, 20 batches of 10)
and, for replay, every file added, removed or changed under DIR.
"""
import hashlib, json, os, sys, time

cmd, root, op, mode, style = sys.argv[1:6]
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"


def tree(d):
    out = {}
    for dp, _, fs in os.walk(d):
        for f in fs:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = hashlib.sha256(fh.read()).hexdigest()
    return out


before = tree(root) if cmd == "replay" else {}
t0 = time.time()
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402
import triton  # noqa: E402
t_import = time.time() - t0
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(1)
if op in ("add", "addbig"):
    n = (64, 1000) if op == "add" else (4096, 4096)
    A, B = (torch.rand(n, device=dev, generator=g) for _ in range(2))
    C = torch.empty(n, device=dev)
    fn = lambda a, b: a + b
    ref = lambda: A.double() + B.double()
    args = (A, B)
elif op == "softmax":
    A = torch.rand(2048, 4096, device=dev, generator=g)
    C = torch.empty_like(A)
    fn = lambda a: torch.softmax(a, dim=-1)
    ref = lambda: torch.softmax(A.double(), dim=-1)
    args = (A,)
else:
    A = torch.rand(1024, 1024, device=dev, generator=g)
    B = torch.rand(1024, 1024, device=dev, generator=g)
    C = torch.empty(1024, 1024, device=dev)
    fn = lambda a, b: a @ b
    ref = lambda: A.double() @ B.double()
    args = (A, B)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
if style == "mut":
    def body(*a):
        a[-1].copy_(fn(*a[:-1]))
    cf = torch.compile(body, fullgraph=True, mode=None if mode == "default" else mode)
    call = lambda: cf(*args, C)
else:
    cf = torch.compile(fn, fullgraph=True, mode=None if mode == "default" else mode)
    call = lambda: C.copy_(cf(*args))
t1 = time.time()
err = ""
try:
    call(); torch.cuda.synchronize()
except Exception as e:
    err = "%s: %s" % (type(e).__name__, str(e)[:400])
t_first = time.time() - t1
t2 = time.time()
for _ in range(5):
    call()
torch.cuda.synchronize()
t_next = time.time() - t2
res = {"cmd": cmd, "op": op, "mode": mode, "style": style, "torch": torch.__version__,
       "triton": triton.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
       "import_s": round(t_import, 2), "first_call_s": round(t_first, 2), "next5_s": round(t_next, 3), "error": err}
if not err:
    res["max_abs_err"] = float((C.double() - ref()).abs().max())
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(20):
        s.record()
        for _ in range(10):
            call()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000 / 10)
    ts.sort()
    res["us_per_call_median"] = round(ts[len(ts) // 2], 2)
    # eager twin, same events
    if op in ("add", "addbig"):
        eager = lambda: torch.add(A, B, out=C)
    elif op == "softmax":
        eager = lambda: torch._softmax(A, -1, False, out=C) if hasattr(torch, "_softmax") else C.copy_(torch.softmax(A, -1))
    else:
        eager = lambda: torch.mm(A, B, out=C)
    ts = []
    for _ in range(20):
        s.record()
        for _ in range(10):
            eager()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000 / 10)
    ts.sort()
    res["eager_us_per_call_median"] = round(ts[len(ts) // 2], 2)
res["counters"] = {k: dict(v) for k, v in counters.items() if k in ("inductor", "aot_autograd", "stats", "dynamo_cudagraphs")}
res["cudagraph_skips"] = dict(counters.get("inductor", {})).get("cudagraph_skips", 0)
if cmd == "replay":
    after = tree(root)
    res["added"] = sorted(set(after) - set(before))[:30]
    res["removed"] = sorted(set(before) - set(after))[:30]
    res["changed"] = sorted(k for k in before if k in after and before[k] != after[k])[:30]
    res["n_added"], res["n_changed"] = len(set(after) - set(before)), len(res["changed"])
else:
    files = tree(root)
    res["files"] = len(files)
    res["bytes"] = sum(os.path.getsize(os.path.join(root, f)) for f in files)
    res["sample_files"] = sorted(files)[:60]
# anything written outside the cache dirs (the default /tmp/torchinductor_$USER)?
res["tmp_torchinductor"] = sorted(p for p in os.listdir("/tmp") if "torchinductor" in p or "triton" in p)
print(json.dumps(res))
