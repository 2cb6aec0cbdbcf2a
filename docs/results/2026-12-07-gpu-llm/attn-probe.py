#!/usr/bin/env python3
"""On the GPU machine: the triton route's attention kernel, exactly as the
route compiles it (KERNEL_SOURCE of routes/triton/route), at every
attention case of gpu-llm under a small grid of launch configurations,
beside torch's scaled_dot_product_attention, to choose the route's
schedule from measurements (the gpu-llm-quick run on an H100 found the
kernel 11-20x slower than torch-eager on the prefill and decode rows).

    python3 docs/results/2026-12-07-gpu-llm/attn-probe.py OUT.jsonl

Each line: case, config (BM, BN, num_warps, num_stages), the median time
of triton.testing.do_bench in microseconds, and the largest difference
from an FP64 reference in units of max|V| (a sanity figure, not the
oracle's bound: the route's rows are judged by tilepipe). A config that
fails to compile or launch is a line with its error.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile

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


def main():
    out = open(sys.argv[1], "w")
    cohort = json.load(open(os.path.join(ROOT, "cohort", "builtin", "gpu-llm.json")))
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
        out.write(json.dumps({"case": case["id"], "torch_sdpa_us": triton.testing.do_bench(sdpa) * 1e3}) + "\n")
        try:
            plan = route.plan(case)
            plan = plan[2:] if isinstance(plan, tuple) else plan
        except Exception as e:
            plan = "%s: %s" % (type(e).__name__, e)
        out.write(json.dumps({"case": case["id"], "route_plan": repr(plan)}) + "\n")
        bd, bdv = max(route.next_pow2(D), 16), max(route.next_pow2(DV), 16)
        for bm in (16, 32, 64):
            for bn in (32, 64):
                for warps in (4, 8):
                    for stages in (1, 2):
                        row = {"case": case["id"], "BM": bm, "BN": bn, "num_warps": warps, "num_stages": stages}
                        try:
                            grid = (triton.cdiv(NQ, bm), B * Hq)
                            call = lambda: kernels.attention_kernel[grid](  # noqa: E731
                                q, k, v, o, Hq, Hkv, NQ, NK, D, DV, 1.0 / D ** 0.5,
                                BM=bm, BN=bn, BD=bd, BDV=bdv, num_warps=warps, num_stages=stages)
                            call()
                            torch.cuda.synchronize()
                            row["err_over_vmax"] = (o.double() - ref).abs().max().item() / vmax
                            row["us"] = triton.testing.do_bench(call, warmup=10, rep=50) * 1e3
                        except Exception as e:  # a config the compiler or the GPU refuses
                            row["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
                        out.write(json.dumps(row) + "\n")
                        out.flush()


if __name__ == "__main__":
    main()
