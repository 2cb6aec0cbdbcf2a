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
cost per call, as a batch sample sees it). The h100-4 run found 130-230
us a compiled call in the build's own process; to see where it goes,
the first VARIANT_CASES cases are also timed in variants of the compiled
call (no_grad, mark_step, raw, no_cudagraphs: factories), and the first
case's compiled calls are profiled (cProfile, the 25 functions with the
most cumulative time, in OUT.jsonl.prof.txt).
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


# The first this many CUDA cases are also timed in variants of the
# compiled call, to find where its time goes: under torch.no_grad(), with
# cudagraph_mark_step_begin() before each call, the compiled function
# called on the set's own tensors without the entry's copies ("raw"), and
# compiled without CUDA graphs.
VARIANT_CASES = 3


def factories(torch, wrapper, op, o, mode, t):
    """{kind: a function making the kind's entry from fresh inputs t}."""
    def compiled(options=None):
        torch._dynamo.reset()
        if options is None:
            return wrapper.Compiled(op, torch, o, mode)
        saved = wrapper.compile_options
        wrapper.compile_options = lambda torch, mode: dict(saved(torch, mode), **options)
        try:
            return wrapper.Compiled(op, torch, o, mode)
        finally:
            wrapper.compile_options = saved

    def no_grad():
        e = compiled().entry(t)

        def call():
            with torch.no_grad():
                e()
        return call

    def mark_step():
        e = compiled().entry(t)

        def call():
            torch.compiler.cudagraph_mark_step_begin()
            e()
        return call

    def raw():
        c = compiled()
        ins = [t[n] for n in c.ins]
        return lambda: c.fn(*ins)

    return {"compiled": lambda: compiled().entry(t), "eager": lambda: wrapper.make_entry(op, t, o, torch, {}),
            "compiled_no_grad": no_grad, "compiled_mark_step": mark_step, "compiled_raw": raw,
            "compiled_no_cudagraphs": lambda: compiled({"triton.cudagraphs": False}).entry(t)}


def profile(torch, entry, path, title):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        entry()
    torch.cuda.synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
    with open(path + ".prof.txt", "w") as f:
        f.write("%s\n%s" % (title, text.getvalue()))


def main():
    name, mode, path = sys.argv[1:4]
    cohort = name if os.path.isfile(name) else os.path.join(ROOT, "cohort", "builtin", name + ".json")
    wrapper.compile_env(tempfile.mkdtemp(prefix="dobench-cache-"))
    import torch
    import triton.testing

    out = open(path, "w")
    cases = [c for c in json.load(open(cohort))["cases"] if c.get("device") == "cuda"]
    for i, case in enumerate(cases):
        op, dt = case["op"], case.get("dtype", "f32")
        dims = {k: case["dims"][k] for k in wrapper.dim_names(op)}
        o = {"eps": (case.get("params") or {}).get("eps", 1e-5), "ranking": case.get("ranking"), "dims": dims, "dtype": dt}
        policy = case.get("policy") or "strict"
        # The wrapper's policies: tf32 lets cuBLAS and cuDNN use TF32.
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = policy == "tf32"
        row = {"case": case["id"], "op": op, "dtype": dt, "policy": policy, "mode": mode}
        kinds = ["compiled", "eager"] + (["compiled_no_grad", "compiled_mark_step", "compiled_raw", "compiled_no_cudagraphs"] if i < VARIANT_CASES else [])
        for kind in kinds:
            try:
                # build_inputs makes the outputs too, empty
                entry = factories(torch, wrapper, op, o, mode, wrapper.build_inputs(torch, op, dims, dt, "cuda"))[kind]()
                for _ in range(3):  # compile, autotune, record the cudagraph
                    entry()
                torch.cuda.synchronize()
                row[kind + "_us"] = triton.testing.do_bench(entry) * 1e3
                t0 = time.perf_counter()
                for _ in range(200):
                    entry()
                torch.cuda.synchronize()
                row[kind + "_loop_us"] = (time.perf_counter() - t0) / 200 * 1e6
                if kind == "compiled" and i == 0:
                    profile(torch, entry, path, "%s %s" % (case["id"], mode))
            except Exception as e:  # kept as the row's result
                row[kind + "_error"] = wrapper.describe_error(e)
        out.write(json.dumps(row) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
