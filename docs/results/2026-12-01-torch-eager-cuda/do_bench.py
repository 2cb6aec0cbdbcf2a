"""The cases of cohort.json timed outside tilepipe, on the same GPU:
triton.testing.do_bench (L2 flushed before every call, one event pair per
call, median) and a warm event loop (100 back-to-back calls between two
events, no flush, median of 20), both through torch eager with out=
tensors as the torch-eager route calls them. Prints one markdown row per
case, in microseconds per call."""
import torch
import triton.testing

def case(op, M, N, K=None, dtype=torch.float32, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    g = torch.Generator(device="cuda").manual_seed(1)
    if op == "add":
        a, b = (torch.randn(M, N, device="cuda", dtype=dtype, generator=g) for _ in range(2))
        c = torch.empty_like(a)
        return lambda: torch.add(a, b, out=c)
    if op == "softmax":
        x = torch.randn(M, N, device="cuda", dtype=dtype, generator=g)
        y = torch.empty_like(x)
        return lambda: torch.ops.aten._softmax.out(x, -1, False, out=y)
    a = torch.randn(M, K, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=dtype, generator=g)
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    return lambda: torch.mm(a, b, out=c)

def warm_loop(f, calls=100, reps=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
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

CASES = [
    ("add 2048x2048 f32", "add", 2048, 2048, None, torch.float32, False),
    ("softmax 2048x2048 f32", "softmax", 2048, 2048, None, torch.float32, False),
    ("gemm 64x64x64 f32", "gemm", 64, 64, 64, torch.float32, False),
    ("gemm 1024x1024x1024 f32", "gemm", 1024, 1024, 1024, torch.float32, False),
    ("gemm 1024x1024x1024 f32 tf32", "gemm", 1024, 1024, 1024, torch.float32, True),
    ("gemm 1024x1024x1024 bf16", "gemm", 1024, 1024, 1024, torch.bfloat16, False),
]
print("torch %s, triton %s, %s" % (torch.__version__, triton.__version__, torch.cuda.get_device_name()))
print("| case | do_bench median (L2 flushed) µs | warm event loop µs |")
print("|---|---:|---:|")
for name, op, M, N, K, dt, tf32 in CASES:
    f = case(op, M, N, K, dt, tf32)
    db = triton.testing.do_bench(f, warmup=25, rep=200, return_mode="median") * 1000
    print("| %s | %.2f | %.2f |" % (name, db, warm_loop(f)))
