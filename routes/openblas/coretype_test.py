"""Tests of the openblas route's core-type choice (issue 12), run by
routes_test.go's TestOpenBLASCoreType with Debian's python3:

  - choose_core on recorded machines: the library's own pick kept where it
    is as wide as the flags allow, the flags' best set where it is not
    (the issue's machine: Prescott on an AVX-512 CPU), a core type from
    the environment kept, no AVX at all; below_best on the same;
  - on this machine, with the real library: the core the flags allow,
    set through OPENBLAS_CORETYPE, is the one the library then reports
    (what build does before it sets the visit's env).

Prints "all passed" or exits 1 naming the failure."""
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
loader = importlib.machinery.SourceFileLoader("openblas_route", os.path.join(HERE, "route"))
spec = importlib.util.spec_from_loader("openblas_route", loader)
route = importlib.util.module_from_spec(spec)
loader.exec_module(route)

AVX512 = {"sse2", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
CASES = [
    # flags, library's pick, environment, want core, want why
    (AVX512, "Prescott", "", "SkylakeX",
     "the library picks Prescott; the CPU flags avx512bw avx512cd avx512dq avx512f avx512vl allow SkylakeX"),
    (AVX512, "Cooperlake", "", None,
     "the library picks Cooperlake, as wide as the CPU flags allow (avx512bw avx512cd avx512dq avx512f avx512vl)"),
    (AVX512, "Haswell", "", "SkylakeX",
     "the library picks Haswell; the CPU flags avx512bw avx512cd avx512dq avx512f avx512vl allow SkylakeX"),
    (AVX512 - {"avx512vl"}, "Prescott", "", "Haswell",
     "the library picks Prescott; the CPU flags avx2 fma allow Haswell"),
    ({"sse2", "avx", "avx2", "fma"}, "Zen", "", None,
     "the library picks Zen, as wide as the CPU flags allow (avx2 fma)"),
    ({"sse2", "avx"}, "", "", "Sandybridge",
     "the library picks no known core; the CPU flags avx allow Sandybridge"),
    ({"sse2"}, "Prescott", "", None,
     "the CPU flags allow no core wider than SSE: the library's own choice (Prescott)"),
    (AVX512, "Prescott", "Haswell", "Haswell",
     "OPENBLAS_CORETYPE=Haswell is set in the environment: kept"),
]

failed = 0
for flags, lib, env, want_core, want_why in CASES:
    core, need, why = route.choose_core(flags, lib, env)
    if core != want_core or why != want_why or (core and not set(need) <= flags):
        print("FAIL choose_core(%s, %r, %r) = %r %r %r, want %r %r" % (sorted(flags), lib, env, core, need, why, want_core, want_why))
        failed += 1
for flags, core, want in [
        (AVX512, "Cooperlake", ""), (AVX512, "SkylakeX", ""),
        (AVX512, "Haswell", "OpenBLAS runs Haswell kernels where the CPU flags avx512bw avx512cd avx512dq avx512f avx512vl allow SkylakeX"),
        (AVX512, "Prescott", "OpenBLAS runs Prescott kernels where the CPU flags avx512bw avx512cd avx512dq avx512f avx512vl allow SkylakeX"),
        (AVX512, "", "OpenBLAS runs unknown kernels where the CPU flags avx512bw avx512cd avx512dq avx512f avx512vl allow SkylakeX"),
        ({"sse2", "avx", "avx2", "fma"}, "Zen", ""),
        ({"sse2"}, "Prescott", "")]:
    if route.below_best(flags, core) != want:
        print("FAIL below_best(%s, %r) = %r, want %r" % (sorted(flags), core, route.below_best(flags, core), want))
        failed += 1
for config, want in [("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64", "Cooperlake"),
                     ("OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64", "Prescott"),
                     ("OpenBLAS 0.3.21 NO_AFFINITY", "")]:
    if route.core_of(config) != want:
        print("FAIL core_of(%r) = %r, want %r" % (config, route.core_of(config), want))
        failed += 1

# The real library on this machine: the flags' best core, forced, is what
# the library reports running.
flags = route.cpu_flags()
core, _, why = route.choose_core(flags, "Prescott", "")
info = route.probe(core)
if not info["available"]:
    print("skip: no OpenBLAS here (%s)" % info["reason"])
elif core and route.core_of(info["config"]) != core:
    print("FAIL OPENBLAS_CORETYPE=%s: the library reports %r" % (core, info["config"]))
    failed += 1
else:
    print("this machine: %s -> %s (%s)" % (why, route.core_of(info["config"]), info["config"]))
    print("library's own pick: %s" % route.core_of(route.probe()["config"]))

if failed:
    sys.exit(1)
print("all passed")
