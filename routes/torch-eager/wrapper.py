"""tilepipe timer for the torch-eager route (docs/protocol.md, "visit").

    python wrapper.py --op OP --device cpu [--dims M=..,N=..[,K=..]] [--eps EPS] --visit VISIT.txt
    python wrapper.py [--op OP ...] --closure

--visit runs one timed visit and prints the JSON report. The route's probe
calls output_policy() at build time, so build and visit cannot disagree on
an op's output policy (`out` or `copy`). --closure prints the
files mapped into a process that has imported torch and run every op once.

Ops whose name starts with an underscore exist only for tests: each one
breaks exactly one rule the visit checks (see TEST_OPS). The route never
offers them.

torch is imported only after the visit file is read, because the thread
environment variables must be set before the libraries start their pools.
"""

import ctypes
import json
import os
import sys
import time

PROTOCOL = 1
GUARD = 4096
ALIGN = 64
MAX_CALLS = 1 << 30

OPS = ("gemm", "add", "sum", "softmax", "rmsnorm", "layernorm")
# Test-only ops, each with the add signature; each breaks one check.
TEST_OPS = ("_mutate_input", "_overrun_output", "_skip_output",
            "_unrepeatable", "_realloc_output", "_late_overrun")

CHECKS = ("guards", "poison", "inputs", "repeat")

POISON1 = {"f32": 0x7FC0DEAD, "i64": 0x7FF8DEADDEADDEAD}
POISON2 = {"f32": 0x7FC0BEEF, "i64": 0x7FF8BEEFBEEFBEEF}
DTYPE_SIZE = {"f32": 4, "i64": 8}


class Usage(Exception):
    """A malformed command line or visit file: exit 2, nothing reported."""


class CheckFailed(Exception):
    """A failed visit check; check is one of CHECKS or None (entry)."""

    def __init__(self, check, reason):
        Exception.__init__(self, reason)
        self.check = check
        self.reason = reason


def signature(op, dims):
    """The ordered (name, role, shape) list of op, as docs/protocol.md."""
    M, N = dims.get("M"), dims.get("N")
    if op == "gemm":
        K = dims.get("K")
        return [("A", "input", [M, K]), ("B", "input", [K, N]), ("C", "output", [M, N])]
    if op == "add" or op in TEST_OPS:
        return [("A", "input", [M, N]), ("B", "input", [M, N]), ("C", "output", [M, N])]
    if op == "sum":
        return [("X", "input", [M, N]), ("Y", "output", [M])]
    if op == "softmax":
        return [("X", "input", [M, N]), ("Y", "output", [M, N])]
    if op == "rmsnorm":
        return [("X", "input", [M, N]), ("W", "input", [N]), ("Y", "output", [M, N])]
    if op == "layernorm":
        return [("X", "input", [M, N]), ("W", "input", [N]), ("B", "input", [N]),
                ("Y", "output", [M, N])]
    raise Usage("unknown op %r" % op)


def softmax_out(torch):
    """aten::_softmax.out if this torch has it (a structured kernel that
    writes straight into out), else None."""
    try:
        return torch.ops.aten._softmax.out
    except (AttributeError, RuntimeError):
        return None


def output_policy(op, torch):
    """Whether op writes into the preallocated output (`out`) or into a new
    tensor that is then copied (`copy`). A pure function of op and the
    installed torch; the route records it at build time.

    layernorm stays `copy` even though aten::native_layer_norm.out exists:
    that out variant is generated (it runs the functional kernel and copies),
    so calling it `out` would hide the copy.
    """
    if op in ("gemm", "add", "sum") or op in TEST_OPS:
        return "out"
    if op == "softmax":
        return "out" if softmax_out(torch) is not None else "copy"
    if op in ("rmsnorm", "layernorm"):
        return "copy"
    raise Usage("unknown op %r" % op)


def make_entry(op, t, eps, torch, buffers):
    """Returns a no-argument function that runs op once on the tensors t."""
    F = torch.nn.functional
    if op == "gemm":
        mm, A, B, C = torch.mm, t["A"], t["B"], t["C"]
        return lambda: mm(A, B, out=C)
    if op == "add":
        add, A, B, C = torch.add, t["A"], t["B"], t["C"]
        return lambda: add(A, B, out=C)
    if op == "sum":
        sum_, X, Y = torch.sum, t["X"], t["Y"]
        return lambda: sum_(X, dim=1, out=Y)
    if op == "softmax":
        X, Y = t["X"], t["Y"]
        sm_out = softmax_out(torch)
        if sm_out is not None:
            return lambda: sm_out(X, 1, False, out=Y)
        softmax = torch.softmax
        return lambda: Y.copy_(softmax(X, dim=1))
    if op == "rmsnorm":
        X, W, Y = t["X"], t["W"], t["Y"]
        rms_norm = getattr(F, "rms_norm", None)
        if rms_norm is not None:
            shape = (X.shape[1],)
            return lambda: Y.copy_(rms_norm(X, shape, W, eps))
        rsqrt = torch.rsqrt
        return lambda: Y.copy_(X * rsqrt(X.pow(2).mean(dim=1, keepdim=True) + eps) * W)
    if op == "layernorm":
        X, W, B, Y = t["X"], t["W"], t["B"], t["Y"]
        layer_norm, shape = F.layer_norm, (X.shape[1],)
        return lambda: Y.copy_(layer_norm(X, shape, W, B, eps))

    A, B, C = t["A"], t["B"], t["C"]
    add = torch.add
    if op == "_mutate_input":
        a32 = A.view(-1).view(torch.int32)[0:1]

        def mutate():
            add(A, B, out=C)
            a32.bitwise_not_()
        return mutate
    if op == "_overrun_output":
        after = buffers["C"].after

        def overrun():
            add(A, B, out=C)
            after[0:1].bitwise_not_()
        return overrun
    if op == "_late_overrun":
        # Clean for the two checked calls, then writes past C while timed:
        # only the checks after timing (step 12) can see it.
        after, calls = buffers["C"].after, [0]

        def late_overrun():
            add(A, B, out=C)
            calls[0] += 1
            if calls[0] == 3:
                after[GUARD - 1:GUARD].bitwise_not_()
        return late_overrun
    if op == "_skip_output":
        return lambda: None
    if op == "_unrepeatable":
        calls = [0]
        c32 = C.view(-1).view(torch.int32)

        def unrepeatable():
            add(A, B, out=C)
            calls[0] += 1
            if calls[0] == 2:
                c32[0:1].bitwise_not_()
        return unrepeatable
    if op == "_realloc_output":
        def realloc():
            C.set_(torch.add(A, B))
        return realloc
    raise Usage("unknown op %r" % op)


class Buffer:
    """One guarded tensor: GUARD canary bytes, the data, GUARD canary bytes,
    all in one uint8 allocation. typed is a contiguous view of the data with
    the param's dtype and shape."""

    def __init__(self, torch, name, role, dtype, shape, nbytes):
        self.name, self.role, self.dtype, self.nbytes = name, role, dtype, nbytes
        raw = torch.empty(GUARD + nbytes + GUARD + ALIGN, dtype=torch.uint8)
        # Torch's CPU allocator is already 64-byte aligned; this keeps the
        # data aligned if an allocator ever is not.
        skip = (-(raw.data_ptr() + GUARD)) % ALIGN
        self.raw = raw
        self.before = raw[skip:skip + GUARD]
        self.data = raw[skip + GUARD:skip + GUARD + nbytes]
        self.after = raw[skip + GUARD + nbytes:skip + GUARD + nbytes + GUARD]
        tdt = {"f32": torch.float32, "i64": torch.int64}[dtype]
        idt = {"f32": torch.int32, "i64": torch.int64}[dtype]
        self.shape = list(shape)
        self.typed = self.data.view(tdt).view(shape)
        self.ints = self.data.view(idt)
        self.ptr = self.typed.data_ptr()
        assert self.typed.is_contiguous() and self.ptr == self.data.data_ptr()
        self.canary = (torch.arange(GUARD, dtype=torch.int32) & 0xFF) ^ 0xA5
        self.canary = self.canary.to(torch.uint8)
        self.before.copy_(self.canary)
        self.after.copy_(self.canary)
        self.private = None

    def load(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if len(data) != self.nbytes:
            raise Usage("%s: %s holds %d bytes, want %d" % (self.name, path, len(data), self.nbytes))
        ctypes.memmove(self.data.data_ptr(), data, self.nbytes)
        self.private = self.data.clone()

    def poison(self, value):
        self.ints.fill_(value)


def first_diff(torch, a, b):
    """Index of the first element where a and b differ, or -1."""
    ne = (a != b).nonzero()
    return int(ne[0, 0]) if ne.numel() else -1


def check_guards(torch, bufs, suffix=""):
    for b in bufs:
        for where, g in (("before", b.before), ("after", b.after)):
            i = first_diff(torch, g, b.canary)
            if i >= 0:
                raise CheckFailed("guards", "guard_overwritten: %s %s byte %d%s" % (b.name, where, i, suffix))


def check_outputs(torch, bufs, poison):
    for b in bufs:
        if b.role != "output":
            continue
        if b.typed.data_ptr() != b.ptr or list(b.typed.shape) != b.shape:
            raise CheckFailed("poison", "output_reallocated: %s" % b.name)
        ne = (b.ints == poison[b.dtype]).nonzero()
        if ne.numel():
            raise CheckFailed("poison", "output_not_overwritten: %s element %d" % (b.name, int(ne[0, 0])))


def check_inputs(torch, bufs, suffix=""):
    for b in bufs:
        if b.role != "input":
            continue
        i = first_diff(torch, b.data, b.private)
        if i >= 0:
            raise CheckFailed("inputs", "input_mutated: %s byte %d%s" % (b.name, i, suffix))


def call_checked(torch, entry, bufs, poison):
    """Steps 3-6: one call and the checks after it."""
    try:
        r = entry()
    except Exception as e:  # the library raised: the entry failed
        raise CheckFailed(None, "entry_failed: raised %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    del r
    check_guards(torch, bufs)
    check_outputs(torch, bufs, poison)
    check_inputs(torch, bufs)


def write_atomic(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def parse_visit(path):
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    if not lines or lines[0] != "tilepipe-visit 1":
        raise Usage("%s:1: want 'tilepipe-visit 1'" % path)
    v = {"params": []}
    for n, ln in enumerate(lines[1:], start=2):
        f = ln.split()
        if f[0] in ("warmup_ms", "sample_ms", "samples", "singles", "threads"):
            if len(f) != 2:
                raise Usage("%s:%d: want '%s VALUE'" % (path, n, f[0]))
            try:
                v[f[0]] = int(f[1])
            except ValueError:
                raise Usage("%s:%d: %s: want an integer, got %r" % (path, n, f[0], f[1]))
            if v[f[0]] < 0:
                raise Usage("%s:%d: %s: want >= 0, got %d" % (path, n, f[0], v[f[0]]))
        elif f[0] == "param":
            if len(f) < 6 or f[1] not in ("input", "output") or f[3] not in DTYPE_SIZE:
                raise Usage("%s:%d: want 'param input|output NAME f32|i64 BYTES PATH [DIM...]'" % (path, n))
            try:
                nbytes = int(f[4])
                shape = [int(d) for d in f[6:]]
            except ValueError:
                raise Usage("%s:%d: bytes and dims must be integers" % (path, n))
            if not os.path.isabs(f[5]):
                raise Usage("%s:%d: param path %r is not absolute" % (path, n, f[5]))
            v["params"].append({"role": f[1], "name": f[2], "dtype": f[3],
                                "bytes": nbytes, "path": f[5], "shape": shape})
        else:
            raise Usage("%s:%d: unknown key %r" % (path, n, f[0]))
    for k in ("warmup_ms", "sample_ms", "samples", "singles", "threads"):
        if k not in v:
            raise Usage("%s: missing %s" % (path, k))
    return v


def dims_from(op, dims_arg, params):
    """Dimensions from --dims, else from the visit's param dims."""
    if dims_arg:
        return dims_arg
    by = {p["name"]: p["shape"] for p in params}
    try:
        if op == "gemm":
            return {"M": by["A"][0], "K": by["A"][1], "N": by["B"][1]}
        key = "X" if "X" in by else "A"
        return {"M": by[key][0], "N": by[key][1]}
    except (KeyError, IndexError):
        raise Usage("no --dims and the visit file does not give the shapes")


def result(status, reason, checks, policy, threads, n=0, batch=(), single=()):
    return {"protocol": PROTOCOL, "status": status, "reason": reason,
            "checks": checks, "calls_per_sample": n, "batch_ns": list(batch),
            "single_ns": list(single), "clock": "CLOCK_MONOTONIC",
            "threads": threads, "output_policy": policy}


def failed_checks(check):
    """Checks before the failing one passed; it failed; later ones did not run."""
    out, state = {}, "pass"
    if check is None:
        state = "not_run"
    for c in CHECKS:
        if c == check:
            out[c] = "fail"
            state = "not_run"
        else:
            out[c] = state
    return out


def visit(opts):
    v = parse_visit(opts["visit"])
    threads = v["threads"]
    if threads >= 1:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[k] = str(threads)

    import torch

    if threads >= 1:
        torch.set_num_threads(threads)
    op = opts["op"]
    policy = output_policy(op, torch)
    nthreads = torch.get_num_threads()

    dims = dims_from(op, opts["dims"], v["params"])
    sig = signature(op, dims)
    got = [(p["name"], p["role"]) for p in v["params"]]
    if got != [(n, r) for n, r, _ in sig]:
        raise Usage("visit params %s do not match op %s's signature %s" % (got, op, [(n, r) for n, r, _ in sig]))
    bufs, t = [], {}
    for p, (name, role, shape) in zip(v["params"], sig):
        nb = DTYPE_SIZE[p["dtype"]]
        for d in shape:
            nb *= d
        if p["dtype"] != "f32" or p["bytes"] != nb or (p["shape"] and p["shape"] != shape):
            raise Usage("param %s: visit says %s %d bytes %s, op %s wants f32 %d bytes %s" % (
                name, p["dtype"], p["bytes"], p["shape"], op, nb, shape))
        b = Buffer(torch, name, role, p["dtype"], shape, nb)
        if role == "input":
            b.load(p["path"])
        bufs.append(b)
        t[name] = b.typed
    outs = [b for b in bufs if b.role == "output"]

    entry = make_entry(op, t, opts["eps"], torch, {b.name: b for b in bufs})
    cuda = opts["device"] == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    try:
        # Steps 2-6.
        for b in outs:
            b.poison(POISON1[b.dtype])
        call_checked(torch, entry, bufs, POISON1)
        first = {b.name: b.data.clone() for b in outs}
        # Step 7.
        for b in outs:
            b.poison(POISON2[b.dtype])
        call_checked(torch, entry, bufs, POISON2)
        for b in outs:
            i = first_diff(torch, b.data, first[b.name])
            if i >= 0:
                raise CheckFailed("repeat", "not_repeatable: %s byte %d" % (b.name, i))
    except CheckFailed as e:
        return result("failed", e.reason, failed_checks(e.check), policy, nthreads)

    # Step 8.
    for b, p in zip(bufs, v["params"]):
        if b.role == "output":
            write_atomic(p["path"], ctypes.string_at(first[b.name].data_ptr(), b.nbytes))

    clock = time.perf_counter_ns
    f = entry

    # Step 9.
    warm_ns = v["warmup_ms"] * 1000000
    t0 = clock()
    while True:
        f()
        sync()
        if clock() - t0 >= warm_ns:
            break

    # Step 10.
    sample_ns = v["sample_ms"] * 1000000
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            f()
        sync()
        dt = clock() - t0
        if dt >= sample_ns or n >= MAX_CALLS:
            break
        n *= 2

    # Step 11.
    batch, single = [], []
    rng = range(n)
    for _ in range(v["samples"]):
        t0 = clock()
        for _ in rng:
            f()
        sync()
        batch.append(clock() - t0)
    for _ in range(v["singles"]):
        t0 = clock()
        f()
        sync()
        single.append(clock() - t0)

    # Step 12.
    try:
        check_guards(torch, bufs, " (after timing)")
        check_inputs(torch, bufs, " (after timing)")
    except CheckFailed as e:
        return result("failed", e.reason, failed_checks(e.check), policy, nthreads)

    return result("ok", "", {c: "pass" for c in CHECKS}, policy, nthreads, n, batch, single)


def closure(opts):
    """Paths of every regular file mapped after torch and each op ran once."""
    import torch

    dims = {"M": 2, "N": 3, "K": 4}
    for op in OPS:
        t = {}
        for name, role, shape in signature(op, dims):
            t[name] = torch.ones(shape) if role == "input" else torch.empty(shape)
        make_entry(op, t, 1e-5, torch, {})()
    paths = set()
    with open("/proc/self/maps") as f:
        for ln in f:
            parts = ln.split(None, 5)
            if len(parts) < 6:
                continue
            p = parts[5].strip()
            if not p.startswith("/") or p.endswith(" (deleted)"):
                continue
            try:
                if os.path.isfile(p):
                    paths.add(os.path.realpath(p))
            except OSError:
                pass
    paths.add(os.path.realpath(sys.executable))
    paths.add(os.path.realpath(os.path.abspath(__file__)))
    return sorted(paths)


def parse_args(argv):
    opts = {"op": None, "device": "cpu", "dims": None, "eps": 1e-5,
            "visit": None, "mode": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--closure":
            opts["mode"] = a[2:]
            i += 1
            continue
        if i + 1 >= len(argv):
            raise Usage("%s wants a value" % a)
        val = argv[i + 1]
        i += 2
        if a == "--op":
            opts["op"] = val
        elif a == "--device":
            if val not in ("cpu", "cuda"):
                raise Usage("--device: want cpu or cuda, got %r" % val)
            opts["device"] = val
        elif a == "--eps":
            try:
                opts["eps"] = float(val)
            except ValueError:
                raise Usage("--eps: not a number: %r" % val)
        elif a == "--dims":
            try:
                opts["dims"] = {k: int(x) for k, x in (kv.split("=", 1) for kv in val.split(","))}
            except ValueError:
                raise Usage("--dims: want M=..,N=..[,K=..], got %r" % val)
        elif a == "--visit":
            opts["visit"] = val
            if opts["mode"] is None:
                opts["mode"] = "visit"
        else:
            raise Usage("unknown argument %r" % a)
    if opts["mode"] is None:
        raise Usage("want --visit VISIT or --closure")
    if opts["mode"] == "visit" and opts["op"] not in OPS + TEST_OPS:
        raise Usage("--op: want one of %s, got %r" % (", ".join(OPS), opts["op"]))
    return opts


def main(argv):
    if sys.byteorder != "little":
        print("wrapper.py: big-endian hosts are not supported", file=sys.stderr)
        return 2
    try:
        opts = parse_args(argv)
        if opts["mode"] == "closure":
            for p in closure(opts):
                print(p)
            return 0
        if opts["device"] == "cuda":
            print("wrapper.py: --device cuda: cuda not implemented yet", file=sys.stderr)
            return 2
        out = visit(opts)
    except Usage as e:
        print("wrapper.py: %s" % e, file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
