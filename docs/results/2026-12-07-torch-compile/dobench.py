#!/usr/bin/env python3
"""On the GPU machine (issue 29's evidence): every CUDA case of a cohort's
torch-compile function, compiled as the route compiles it (the wrapper's
Compiled: pure_op, compile_options(MODE), fullgraph, static shapes) and
timed by triton.testing.do_bench, beside the eager entry the torch-eager
route times: the row-by-row figure a reviewer sets against tilepipe's
rows of the same cases (the claim is tilepipe's novel sample; do_bench
times warm calls with the L2 flushed between them, its own way).

    python3 docs/results/2026-12-07-torch-compile/dobench.py COHORT MODE OUT.jsonl

COHORT is a built-in cohort name (cohort/builtin/NAME.json) or a path;
MODE one of the wrapper's compile modes. Each line: case, op, dtype, the
median microseconds of do_bench for the compiled and the eager entry, or
the error that stopped one; loop_us is 200 back-to-back calls of the
entry between two host clock reads and one synchronisation (the host's
cost per call, as a batch sample sees it). For the first case, where the
compiled call's time goes: cProfile of 200 calls, the 25 functions with
the most cumulative time, in OUT.jsonl.prof.txt (the H100 run of
h100-4 found 130-230 us a call in the build's own process).
"""

import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "routes", "torch-eager"))
import wrapper  # noqa: E402


def main():
    name, mode, path = sys.argv[1:4]
    cohort = name if os.path.isfile(name) else os.path.join(ROOT, "cohort", "builtin", name + ".json")
    wrapper.compile_env(tempfile.mkdtemp(prefix="dobench-cache-"))
    import torch
    import triton.testing

    out = open(path, "w")
    profiled = False
    for case in json.load(open(cohort))["cases"]:
        if case.get("device") != "cuda":
            continue
        op, dt = case["op"], case.get("dtype", "f32")
        dims = {k: case["dims"][k] for k in wrapper.dim_names(op)}
        o = {"eps": (case.get("params") or {}).get("eps", 1e-5), "ranking": case.get("ranking"), "dims": dims, "dtype": dt}
        policy = case.get("policy") or "strict"
        # The wrapper's policies: tf32 lets cuBLAS and cuDNN use TF32.
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = policy == "tf32"
        row = {"case": case["id"], "op": op, "dtype": dt, "policy": policy, "mode": mode}
        for kind in ("compiled", "eager"):
            try:
                t = wrapper.build_inputs(torch, op, dims, dt, "cuda")
                if kind == "compiled":
                    torch._dynamo.reset()
                    entry = wrapper.Compiled(op, torch, o, mode).entry(t)
                else:  # build_inputs made the outputs too, empty
                    entry = wrapper.make_entry(op, t, o, torch, {})
                for _ in range(3):  # compile, autotune, record the cudagraph
                    entry()
                torch.cuda.synchronize()
                row[kind + "_us"] = triton.testing.do_bench(entry) * 1e3
                t0 = time.perf_counter()
                for _ in range(200):
                    entry()
                torch.cuda.synchronize()
                row[kind + "_loop_us"] = (time.perf_counter() - t0) / 200 * 1e6
                if kind == "compiled" and not profiled:
                    profiled = True
                    prof = cProfile.Profile()
                    prof.enable()
                    for _ in range(200):
                        entry()
                    torch.cuda.synchronize()
                    prof.disable()
                    text = io.StringIO()
                    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
                    with open(path + ".prof.txt", "w") as f:
                        f.write("%s %s\n%s" % (case["id"], mode, text.getvalue()))
            except Exception as e:  # kept as the row's result
                row[kind + "_error"] = wrapper.describe_error(e)
        out.write(json.dumps(row) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
