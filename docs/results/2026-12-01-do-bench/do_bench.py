"""The do-bench cohort's cases timed outside tilepipe, in the same process
layout as the torch-eager route calls them (out= tensors, TF32 off):
triton.testing.do_bench's median (it flushes the L2 before every call:
256 MB zeroed, one event pair per call) and a warm event loop (no flush,
back-to-back calls between two events, median of 20). Prints one
markdown row per case, in microseconds per call."""
import torch
import triton
import triton.testing

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def case(op):
    g = torch.Generator(device="cuda").manual_seed(1)
    if op == "add":
        a, b = (torch.randn(16384, 16384, device="cuda", generator=g) for _ in range(2))
        c = torch.empty_like(a)
        return lambda: torch.add(a, b, out=c)
    a, b = (torch.randn(4096, 4096, device="cuda", generator=g) for _ in range(2))
    c = torch.empty(4096, 4096, device="cuda")
    return lambda: torch.mm(a, b, out=c)


def warm_loop(f, calls=20, reps=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        f()
    out = []
    for _ in range(reps):
        s.record()
        for _ in range(calls):
            f()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1000 / calls)
    out.sort()
    return out[len(out) // 2]


print("torch %s, triton %s, %s" % (torch.__version__, triton.__version__, torch.cuda.get_device_name()))
print("| case | do_bench median (L2 flushed before every call) µs | warm event loop µs |")
print("|---|---:|---:|")
for name, op in (("gemm-4096x4096x4096-cuda (torch.mm, f32 strict)", "gemm"), ("add-16384x16384-cuda (2^28 f32)", "add")):
    f = case(op)
    db = triton.testing.do_bench(f, warmup=100, rep=1000, return_mode="median") * 1000
    print("| %s | %.2f | %.2f |" % (name, db, warm_loop(f)), flush=True)
