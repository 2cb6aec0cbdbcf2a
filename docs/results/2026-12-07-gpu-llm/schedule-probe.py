#!/usr/bin/env python3
"""On the GPU machine: the triton route's attention and gemm kernels,
exactly as the route compiles them (KERNEL_SOURCE of routes/triton/route),
at every attention or gemm-family case of gpu-llm under a small grid of
launch configurations, beside torch, to choose the route's schedules from
measurements (the gpu-llm-quick run on an H100 found attention 11-20x and
f16/bf16 gemm 1.3-2x slower than torch-eager, and gemm 4x slower than
cuBLAS in warm calls).

    python3 docs/results/2026-12-07-gpu-llm/schedule-probe.py attention|gemm OUT.jsonl

Each line: case, config, the median time of triton.testing.do_bench in
microseconds, and the largest difference from an FP64 reference in units
of the reference's largest magnitude (a sanity figure, not the oracle's
bound: the route's rows are judged by tilepipe). A config that fails to
compile or launch is a line with its error. Lines with "route_plan" give
the route's own choice, "torch_us" torch's time.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import time

import torch
import triton
import triton.testing

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_loader = importlib.machinery.SourceFileLoader("triton_route", os.path.join(ROOT, "routes", "triton", "route"))
route = importlib.util.module_from_spec(importlib.util.spec_from_loader("triton_route", _loader))
_loader.exec_module(route)
src = os.path.join(tempfile.mkdtemp(), "kernels.py")
with open(src, "w") as f:
    f.write(route.KERNEL_SOURCE)
spec = importlib.util.spec_from_file_location("kernels", src)
kernels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernels)
# PROBE_BUDGET seconds (300 unless set): the probe stops at the first
# config after it, so a device call always ends with its lines written.
DEADLINE = time.monotonic() + float(os.environ.get("PROBE_BUDGET", "300"))
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def reference(q, k, v, hq, hkv):
    q, k, v = q.double(), k.double(), v.double()
    g = hq // hkv
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    nq, nk = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    i = torch.arange(nq, device=q.device)[:, None]
    j = torch.arange(nk, device=q.device)[None, :]
    s = s.masked_fill(j > i + nk - nq, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def route_plan(case):
    try:
        plan = route.plan(case)
        return repr(plan[2:] if isinstance(plan, tuple) else plan)
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)


def bench(row, call, check):
    """Runs call once, checks it, times it into row; errors into row."""
    if time.monotonic() > DEADLINE:
        raise SystemExit("schedule-probe: PROBE_BUDGET spent")
    try:
        call()
        torch.cuda.synchronize()
        row["err"] = check()
        row["us"] = triton.testing.do_bench(call, warmup=10, rep=50) * 1e3
    except Exception as e:  # a config the compiler or the GPU refuses
        row["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    return row


def gemm_cases(out, cohort):
    # Half storage only: FP32 strict computes in IEEE FP32 without tensor
    # cores, a schedule of its own.
    for case in (c for c in cohort["cases"] if c["op"] in ("gemm", "gemm_relu", "gemm_gelu", "bmm") and c.get("dtype") in ("f16", "bf16")):
        case.setdefault("dtype", "f32")
        d, dt = case["dims"], case["dtype"]
        M, N, K, B = d["M"], d["N"], d["K"], d.get("B", 1)
        g = torch.Generator(device="cuda").manual_seed(case["seed"])
        a = torch.randn(B, M, K, device="cuda", generator=g).to(DT[dt])
        b = torch.randn(B, K, N, device="cuda", generator=g).to(DT[dt])
        c = torch.empty(B, M, N, device="cuda", dtype=DT[dt])
        z = a.double() @ b.double()
        act = {"gemm": 0, "bmm": 0, "gemm_relu": 1, "gemm_gelu": 2}[case["op"]]
        if act:
            z = z * 0.125 + 0.25
            z = z.clamp(min=0) if act == 1 else torch.nn.functional.gelu(z, approximate="tanh")
        zmax = z.abs().max().item()
        precision = "tf32" if dt == "f32" and case.get("policy") == "tf32" else "ieee"
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        out.write(json.dumps({"case": case["id"], "route_plan": route_plan(case),
                              "torch_us": triton.testing.do_bench(lambda: torch.matmul(a, b)) * 1e3}) + "\n")
        tiles = ((64, 64), (64, 128), (128, 128), (128, 256))
        if M <= 64:  # decode-like: rows of 16 or 32, the least tl.dot takes, and narrower columns for more programs
            tiles = ((16, 32), (16, 64), (16, 128), (32, 64), (32, 128), (64, 64))
        for bm, bn in tiles:
            for bk in (32, 64):
                for warps in (4, 8):
                    for stages in (3, 4):
                        row = {"case": case["id"], "BM": bm, "BN": bn, "BK": bk, "num_warps": warps, "num_stages": stages}
                        grid = (triton.cdiv(M, bm), triton.cdiv(N, bn), B)
                        call = lambda: kernels.gemm_kernel[grid](  # noqa: E731
                            a, b, c, M, N, K, BM=bm, BN=bn, BK=bk, ACT=act, PRECISION=precision,
                            num_warps=warps, num_stages=stages)
                        out.write(json.dumps(bench(row, call, lambda: (c.double() - z).abs().max().item() / zmax)) + "\n")
                        out.flush()


def main():
    out = open(sys.argv[2], "w")
    cohort = json.load(open(os.path.join(ROOT, "cohort", "builtin", "gpu-llm.json")))
    if sys.argv[1] == "gemm":
        gemm_cases(out, cohort)
        return
    for case in (c for c in cohort["cases"] if c["op"] == "attention"):
        case.setdefault("dtype", "f32")
        d, dt = case["dims"], case["dtype"]
        B, Hq, Hkv, NQ, NK, D, DV = (d[x] for x in ("B", "Hq", "Hkv", "Q", "K", "D", "Dv"))
        g = torch.Generator(device="cuda").manual_seed(case["seed"])
        q = torch.randn(B, Hq, NQ, D, device="cuda", generator=g).to(DT[dt])
        k = torch.randn(B, Hkv, NK, D, device="cuda", generator=g).to(DT[dt])
        v = torch.randn(B, Hkv, NK, DV, device="cuda", generator=g).to(DT[dt])
        o = torch.empty(B, Hq, NQ, DV, device="cuda", dtype=DT[dt])
        ref = reference(q, k, v, Hq, Hkv)
        vmax = v.double().abs().max().item()
        kk, vv = k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1)
        mask = torch.ones(NQ, NK, device="cuda", dtype=torch.bool).tril(NK - NQ)
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)  # noqa: E731
        out.write(json.dumps({"case": case["id"], "route_plan": route_plan(case),
                              "torch_us": triton.testing.do_bench(sdpa) * 1e3}) + "\n")
        bd, bdv = max(route.next_pow2(D), 16), max(route.next_pow2(DV), 16)
        check = lambda: (o.double() - ref).abs().max().item() / vmax  # noqa: E731
        split_cases(out, case, q, k, v, o, check)
        for bm in (16, 32, 64):
            for bn in (32, 64):
                for warps in (4, 8):
                    for stages in (1, 2):
                        row = {"case": case["id"], "BM": bm, "BN": bn, "num_warps": warps, "num_stages": stages}
                        grid = (triton.cdiv(NQ, bm), B * Hq)
                        call = lambda: kernels.attention_kernel[grid](  # noqa: E731
                            q, k, v, o, Hq, Hkv, NQ, NK, D, DV, 1.0 / D ** 0.5,
                            BM=bm, BN=bn, BD=bd, BDV=bdv, num_warps=warps, num_stages=stages)
                        out.write(json.dumps(bench(row, call, check)) + "\n")
                        out.flush()


def split_cases(out, case, q, k, v, o, check):
    """Where the route plans decode attention as a pipeline (its keys
    split, flash-decoding), the two launches at the route's split count,
    half and twice it: a line each with "split" and "chunk"."""
    pl = route.plan(case)
    if not (isinstance(pl, tuple) and isinstance(pl[3], list)):
        return
    consts, vals = pl[2], {n: x for n, _, x in pl[1]}
    d = case["dims"]
    B, Hq, Hkv, NQ, NK, D, DV = (d[x] for x in ("B", "Hq", "Hkv", "Q", "K", "D", "Dv"))
    bm, bn, bdv = consts["BM"], consts["BN"], consts["BDV"]
    for want in sorted({vals["S"], max(2, vals["S"] // 2), vals["S"] * 2}):
        ch = triton.cdiv(triton.cdiv(NK, want), bn) * bn
        s = triton.cdiv(NK, ch)
        w = torch.empty(B * Hq * s * (bm * bdv + 2 * bm), device="cuda", dtype=torch.float32)

        def call(s=s, ch=ch, w=w):
            for phase, grid in ((0, (s, B * Hq)), (1, (1, B * Hq))):
                kernels.attention_split_kernel[grid](q, k, v, o, w, Hq, Hkv, NQ, NK, D, DV, 1.0 / D ** 0.5, ch, s, phase,
                                                     num_warps=4, **consts)
        row = {"case": case["id"], "split": s, "chunk": ch, "route_split": vals["S"], **consts}
        out.write(json.dumps(bench(row, call, check)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
