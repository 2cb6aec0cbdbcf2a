#!/usr/bin/env python3
"""On the GPU machine (issue 29's evidence): every CUDA case of a cohort's
torch-compile function, compiled as the route compiles it (the wrapper's
Compiled: pure_op, compile_options(MODE), fullgraph, static shapes) and
timed by triton.testing.do_bench, beside the eager entry the torch-eager
route times: the row-by-row figure a reviewer sets against tilepipe's
rows of the same cases (the claim is tilepipe's novel sample; do_bench
times warm calls with the L2 flushed between them, its own way).

    python3 docs/results/2026-12-07-torch-compile/dobench.py COHORT MODE OUT.jsonl [CAPTURE]

With CAPTURE (a tilepipe capture directory), the cache files of every
torch-compile build in it are laid into one Inductor/Triton cache first,
so each compiled function here is loaded from what capture stored (the
row's fxgraph_cache_hit says whether it was: 1 and no miss is "the same
compiled function" that tilepipe timed) instead of compiled afresh.

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
import shutil
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
VARIANT_CASES = int(os.environ.get("VARIANT_CASES", "3"))


def lay_cache(capture, cache):
    """Copies every cases/*/torch-compile/cache/REL layer of the capture's
    manifest to cache/REL (the first of two layers at one REL wins; their
    count is returned with the number laid)."""
    blobs = os.path.join(capture, "blobs", "sha256")
    index = json.load(open(os.path.join(capture, "index.json")))
    man = json.load(open(os.path.join(blobs, index["manifests"][0]["digest"].split(":")[1])))
    laid = clashes = 0
    for layer in man["layers"]:
        title = (layer.get("annotations") or {}).get("org.opencontainers.image.title", "")
        parts = title.split("/", 4)
        if len(parts) < 5 or parts[0] != "cases" or parts[2] != "torch-compile" or parts[3] != "cache":
            continue
        dst = os.path.join(cache, parts[4])
        if os.path.exists(dst):
            clashes += 1
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(blobs, layer["digest"].split(":")[1]), dst)
        laid += 1
    return laid, clashes


def factories(torch, wrapper, op, o, mode, t):
    """{kind: a function making the kind's entry from fresh inputs t}."""
    def compiled(options=None):
        torch._dynamo.reset()
        from torch._dynamo.utils import counters
        counters.clear()
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

    def inference_mode():
        e = compiled().entry(t)

        def call():
            with torch.inference_mode():
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
            "compiled_no_grad": no_grad, "compiled_inference_mode": inference_mode, "compiled_mark_step": mark_step, "compiled_raw": raw,
            "compiled_no_cudagraphs": lambda: compiled({"triton.cudagraphs": False}).entry(t)}


def case_id(case, dims):
    """tilepipe's default id (cohort.DefaultID) of a case without one."""
    id = case["op"] + "-" + "x".join(str(dims[k]) for k in dims)
    for s in (case.get("dtype"), case.get("ranking"), case.get("pattern"), case.get("policy"), case.get("device")):
        if s and s not in ("f32", "normal", "strict"):
            id += "-" + s
    return id


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
    cache = tempfile.mkdtemp(prefix="dobench-cache-")
    laid = lay_cache(sys.argv[4], cache) if len(sys.argv) > 4 else None
    wrapper.compile_env(cache)
    import torch
    import triton.testing

    out = open(path, "w")
    if laid:
        out.write(json.dumps({"cache_files_laid": laid[0], "cache_clashes": laid[1]}) + "\n")
    cases = [c for c in json.load(open(cohort))["cases"] if c.get("device") == "cuda"]
    for i, case in enumerate(cases):
        op, dt = case["op"], case.get("dtype", "f32")
        dims = {k: case["dims"][k] for k in wrapper.dim_names(op)}
        o = {"eps": (case.get("params") or {}).get("eps", 1e-5), "ranking": case.get("ranking"), "dims": dims, "dtype": dt}
        policy = case.get("policy") or "strict"
        # The wrapper's policies: tf32 lets cuBLAS and cuDNN use TF32.
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = policy == "tf32"
        row = {"case": case.get("id") or case_id(case, dims), "op": op, "dtype": dt, "policy": policy, "mode": mode}
        kinds = ["compiled", "eager"] + (["compiled_no_grad", "compiled_inference_mode", "compiled_mark_step", "compiled_raw", "compiled_no_cudagraphs"] if i < VARIANT_CASES else [])
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
                if kind == "compiled":
                    from torch._dynamo.utils import counters
                    row["counters"] = {k: dict(v) for k, v in counters.items() if k in ("inductor", "aot_autograd", "stats")}
                    if i == 0:
                        profile(torch, entry, path, "%s %s" % (row["case"], mode))
            except Exception as e:  # kept as the row's result
                row[kind + "_error"] = wrapper.describe_error(e)
        out.write(json.dumps(row) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
