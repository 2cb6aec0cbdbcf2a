"""tilepipe timer for the torch-eager route (docs/protocol.md, "visit (timers),
protocol 3" and "closure").

    python wrapper.py --op OP --device cpu|cuda --dims NAME=V,... [--dtype f32|f16|bf16]
                      [--ranking stable|standard] [--eps EPS] [--policy strict|tf32]
                      --visit VISIT.txt
    python wrapper.py [--op OP ...] [--device cpu|cuda] --closure

--visit runs one visit exactly as the C harness (prepare/harness/harness.c)
does. Replay owns the buffers: every (param, pool) is a memory file that
replay filled and handed over as an open descriptor (fd 5 and up, named in
the visit file); the wrapper maps the inputs read-only and the outputs
read-write, and never allocates, reads or writes a buffer file by itself.
It builds one entry per buffer set (the warm sets and the fresh sets),
validates every warm set in set order (steps 1-6: poison, call, checks,
re-poison, call, checks, compare), leaves the outputs in the warm output
files, writes the validated report on fd 4, then serves replay's commands
from fd 3 ("run SEQ N": N back-to-back calls between two clock reads,
rotating over the warm sets; "fresh SEQ N": one call on each of the next
N fresh sets, none ever called before; both answered with a sample
report; "end": the checks
after timing and the final report). After its last report (the final one,
or a failed validated one) it waits for replay to close fd 3 and ends with
os._exit(0). Replay owns the clock and the call counts; this timer never
warms up, calibrates or samples by itself. Nothing is ever written on
stdout in --visit mode. Exit 2 is a usage, parse or I/O error, explained
on stderr.

The route's probe calls probe() at build time: it runs every op in every
dtype it may take on small tensors on the case's device and records
output_policy(), so build and visit cannot disagree on an op's output
policy (`out` or `copy`), and an op this torch lacks in some dtype is
`unsupported` at build time. --closure prints the files mapped into a
process that has imported torch and run every op once (on the GPU, after
initialising CUDA, for --device cuda), every module file (and its
cached .pyc) that process imported, and every file it opened for reading
or ran as a program (class Accessed): prepare pins them, and replay's
sandbox shows only the directories that hold them.

f16 and bf16 tensors are computed the way torch computes that dtype on the
device (intermediates of composite ops are rounded to the storage dtype).

Ops whose name starts with an underscore exist only for tests: each one
breaks exactly one rule the visit checks (see TEST_OPS). The route never
offers them; a test selects one with `--op _NAME` in the wrapper's argv
(each takes add's signature and dims M,N).

--device cuda (docs/gpu.md) runs the same visit on the GPU, as the C CUDA
timer (prepare/harness/cuda/backend.c) does: every memory file gets one
device mirror of the whole file (canary gaps included), uploaded once, and
each set's tensors are views of its mirror (class Device). A validation
call uploads the set's poisoned outputs, calls, synchronizes the whole
device and downloads the set's outputs into the memory file before the
host checks; after every validation call and after timing every mirror is
downloaded and compared with its file (inputs whole, outputs in the canary
gaps). A sample is timed with two CUDA events around its calls; a fresh
sample's outputs are downloaded before its answer, and "end" downloads
every warm set's outputs before the final checks. --policy tf32 allows
TF32 in cuBLAS and cuDNN; strict (the default) forbids it. --device cuda
never falls back to the CPU: without a usable GPU it exits 2 with "CUDA
unavailable: ...", in --closure mode too.

torch is imported only after the visit file is read, because the thread
environment variables must be set before the libraries start their pools.
"""

import ctypes
import fcntl
import itertools
import json
import mmap
import os
import socket
import stat
import sys
import time
import traceback
import warnings

ALIGN = 64                   # a set's data starts on this boundary
PAGE = 4096                  # a memory file's size is a multiple of this
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x10)  # Linux 5.1; Python 3.11 lacks the name
MAX_CALLS = 1 << 30          # most calls of one "run" or "fresh" command
MAX_SEQ = 1 << 62            # largest sequence number of a command
MAX_THREADS = 1 << 20
MAX_BYTES = 1 << 40
MAX_SETS = 1 << 20           # most buffer sets of a pool
MAX_FD = 1 << 30             # larger fd fields do not parse
FIRST_MEM_FD = 5             # replay's memory files start here
MAX_NAME = 64
MAX_COMMAND = 126            # longest command line, without its newline
MAX_ERROR = 400              # longest exception message kept in a reason
CMD_FD, REPORT_FD = 3, 4     # replay's command socket and report pipe
POOLS = ("warm", "fresh")    # in the visit file's order
MIN_SETS = {"warm": 2, "fresh": 1}
LIAR_DIVISOR = 4             # _liar reports a quarter of the ns it measured

# Every op of docs/protocol.md's table, in its order.
OPS = ("gemm", "gemm_relu", "gemm_gelu", "bmm", "gemv", "add", "gelu_add",
       "sigmoid_pair", "gelu_pair", "swiglu", "rope", "sum", "max", "softmax",
       "rmsnorm", "layernorm", "residual_layernorm", "cross_entropy",
       "scan_ordered", "scan", "argmax", "topk", "sort", "embedding", "attention")
# Test-only ops, each with the add signature; each breaks one rule. Calls
# are counted over the whole visit (every set's entry shares the count):
# validation makes 2·K of them, so call 2·K+1 is the first timed call.
#   _mutate_input    flips a bit of input A on every call: A is a read-only
#                    mapping of a sealed file, so the first call dies of
#                    SIGSEGV (replay's crashed; the C harness's input_written)
#   _overrun_output  writes the first byte after C (guard_overwritten)
#   _skip_output     writes nothing (output_not_overwritten)
#   _unrepeatable    changes C[0] on the second call (not_repeatable)
#   _realloc_output  replaces C's storage (output_reallocated)
#   _late_overrun    writes the last canary byte after C (the byte before the
#                    next set) on the first timed call, seen only by the
#                    checks after timing
#   _late_raise      raises on the first timed call, from another exception
#                    (entry_failed ... <- its cause (during timing), in the
#                    final report)
#   _liar            computes add, but reports a quarter of the ns it
#                    measured for each sample (replay's clock_mismatch)
#   _chatty          prints a fake final report on stdout (flushed) during
#                    the visit's first call (replay's unexpected_output)
#   _skip_fresh      on the fresh (novel) sets, skips one call in 97
#                    (output_not_overwritten)
#   _fake_fresh      on the fresh (novel) sets, writes A into C (finite,
#                    not the answer) on one call in 50; the warm sets stay
#                    right (a novel call's oracle)
#   _skip_warm       computes add on validation and every fresh (novel)
#                    set, writes nothing on a warm set after validation:
#                    the warm outputs hold replay's fill when timing starts
#                    (on a GPU, Device.warm_fill), so replay's comparison
#                    after timing names the set (timed_output_mismatch)
#   _slow_warm       computes add, 50 us slower on the warm sets: passes,
#                    and gains nothing (the claim rests on novel samples)
#   _read_ahead      a helper thread computes every fresh set's answer from
#                    its inputs as they are whenever it runs; a call on a
#                    fresh set copies that answer (frozen between novel
#                    samples, the helper holds the last sample's answers:
#                    a novel call's oracle)
TEST_OPS = ("_mutate_input", "_overrun_output", "_skip_output",
            "_unrepeatable", "_realloc_output", "_late_overrun",
            "_late_raise", "_liar", "_chatty", "_skip_fresh", "_fake_fresh", "_slow_warm", "_skip_warm",
            "_read_ahead", "_memo_content", "_precompute", "_paced_memo", "_recompile")
#   _recompile       computes add, and on the first timed call writes a new
#                    kernel file into $TILEPIPE_CACHE, the visit's copy of
#                    its captured cache, as a JIT that compiles again at
#                    replay does (replay's cache_changed)
#   _paced_memo      _memo_content with every hit paced to 40 us: above the
#                    floors, below an honest call; gains nothing, as
#                    _memo_content does
#   _precompute      computes every fresh set's answer when its entry is
#                    made, before validation (protocol 3's fresh sets held
#                    their inputs from the start); a call on a fresh set
#                    copies it (protocol 4's slots hold canary until a
#                    novel sample: a novel call's oracle)
#   _memo_content    remembers each answer by 8 sampled elements of A and B
#                    and copies it back on a match: no novel set matches,
#                    so it computes every novel call and gains nothing
READ_AHEAD = []  # _read_ahead's fresh sets: (A, B, answer, state)
MEMO = {}        # _memo_content's answers by sampled input bytes

# Dimension names per op; ops not listed take M,N.
DIMS = {"gemm": ("M", "N", "K"), "gemm_relu": ("M", "N", "K"), "gemm_gelu": ("M", "N", "K"),
        "bmm": ("B", "M", "N", "K"), "gemv": ("M", "K"), "rope": ("M", "N", "R"),
        "topk": ("M", "N", "K"), "embedding": ("V", "D", "M"),
        "attention": ("B", "Hq", "Hkv", "Q", "K", "D", "Dv")}
RANKED_OPS = ("topk", "sort")
RANKINGS = ("stable", "standard")
DTYPES = ("f32", "f16", "bf16")
POLICIES = ("strict", "tf32")  # --policy: TF32 allowed (on the GPU) under tf32 alone
MAX_GRAPH_REPLAYS, MAX_GRAPH_CALLS = 65536, 10000000  # a graph sample's caps (docs/gpu.md)
EPS_OPS = ("rmsnorm", "layernorm", "residual_layernorm")

CHECKS = ("guards", "poison", "inputs", "repeat")

POISON1 = {"f32": 0x7FC0DEAD, "i64": 0x7FF8DEADDEADDEAD, "f16": 0x7E5D, "bf16": 0x7FDE}
POISON2 = {"f32": 0x7FC0BEEF, "i64": 0x7FF8BEEFBEEFBEEF, "f16": 0x7E5E, "bf16": 0x7FBE}
DTYPE_SIZE = {"f32": 4, "i64": 8, "f16": 2, "bf16": 2}

SQRT_2_OVER_PI = 0.7978845608028654
GELU_C = 0.044715


class Usage(Exception):
    """A malformed command line or visit file: exit 2, nothing reported."""


class CheckFailed(Exception):
    """A failed visit check; check is one of CHECKS or None (entry)."""

    def __init__(self, check, reason):
        Exception.__init__(self, reason)
        self.check = check
        self.reason = reason


def dim_names(op):
    return DIMS.get(op, ("M", "N"))


def variants(op):
    """The (dtype, ranking) pairs a case of op may ask for."""
    rks = RANKINGS if op in RANKED_OPS else (None,)
    return [(d, r) for d in DTYPES for r in rks]


def variant_key(dtype, ranking):
    return dtype if ranking is None else "%s/%s" % (dtype, ranking)


def signature(op, dims, F="f32"):
    """The ordered (name, role, dtype, shape) list of op, as docs/protocol.md;
    F is the storage dtype of the float tensors."""
    d = dims.get
    M, N, K = d("M"), d("N"), d("K")

    def i(name, *shape, dt=None):
        return (name, "input", dt or F, list(shape))

    def o(name, *shape, dt=None):
        return (name, "output", dt or F, list(shape))
    if op in ("gemm", "gemm_relu", "gemm_gelu"):
        return [i("A", M, K), i("B", K, N), o("C", M, N)]
    if op == "bmm":
        B = d("B")
        return [i("A", B, M, K), i("B", B, K, N), o("C", B, M, N)]
    if op == "gemv":
        return [i("A", M, K), i("X", K), o("Y", M)]
    if op in ("add", "gelu_add") or op in TEST_OPS:
        return [i("A", M, N), i("B", M, N), o("C", M, N)]
    if op in ("sigmoid_pair", "gelu_pair"):
        return [i("X", M, N), o("Y", M, N), o("D", M, N)]
    if op == "swiglu":
        return [i("G", M, N), i("U", M, N), o("Y", M, N)]
    if op == "rope":
        h = d("R") // 2
        return [i("X", M, N), i("COS", M, h), i("SIN", M, h), o("Y", M, N)]
    if op in ("sum", "max"):
        return [i("X", M, N), o("Y", M)]
    if op in ("softmax", "scan_ordered", "scan"):
        return [i("X", M, N), o("Y", M, N)]
    if op == "rmsnorm":
        return [i("X", M, N), i("W", N), o("Y", M, N)]
    if op == "layernorm":
        return [i("X", M, N), i("W", N), i("B", N), o("Y", M, N)]
    if op == "residual_layernorm":
        return [i("X", M, N), i("R", M, N), i("W", N), i("B", N), o("Y", M, N), o("H", M, N)]
    if op == "cross_entropy":
        return [i("X", M, N), i("T", M, dt="i64"), o("L", M)]
    if op == "argmax":
        return [i("X", M, N), o("V", M), o("I", M, dt="i64")]
    if op == "topk":
        return [i("X", M, N), o("V", M, K), o("I", M, K, dt="i64")]
    if op == "sort":
        return [i("X", M, N), o("V", M, N), o("I", M, N, dt="i64")]
    if op == "embedding":
        return [i("E", d("V"), d("D")), i("I", M, dt="i64"), o("Y", M, d("D"))]
    if op == "attention":
        B, Hq, Hkv, Q, Kn = d("B"), d("Hq"), d("Hkv"), d("Q"), d("K")
        return [i("Q", B, Hq, Q, d("D")), i("K", B, Hkv, Kn, d("D")),
                i("V", B, Hkv, Kn, d("Dv")), o("O", B, Hq, Q, d("Dv"))]
    raise Usage("unknown op %r" % op)


def check_dims(op, dims):
    """The op's own constraints on dims beyond positivity, or ''."""
    d = dims
    if op == "rope" and (d["R"] % 2 or d["R"] > d["N"]):
        return "R=%d: want an even rotary width <= N=%d" % (d["R"], d["N"])
    if op == "topk" and d["K"] > d["N"]:
        return "K=%d: want K <= N=%d" % (d["K"], d["N"])
    if op == "attention":
        if d["Hq"] % d["Hkv"]:
            return "Hq=%d: want a multiple of Hkv=%d" % (d["Hq"], d["Hkv"])
        if d["Q"] > d["K"]:
            return "Q=%d: want Q <= K=%d" % (d["Q"], d["K"])
    return ""


def torch_dtype(torch, dtype):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i64": torch.int64}[dtype]


def cuda_unavailable(torch):
    """Why this torch cannot run ops on the GPU here, or '' when it can:
    a torch built without CUDA, or torch.cuda.is_available() False (with
    the warning torch gave about it, e.g. no driver or no device)."""
    if not torch.version.cuda:
        return "torch %s was built without CUDA" % torch.__version__
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ok = torch.cuda.is_available()
    if ok:
        return ""
    why = "torch %s (CUDA %s): torch.cuda.is_available() is False" % (torch.__version__, torch.version.cuda)
    if seen:
        lines = str(seen[0].message).strip().splitlines()
        if lines:
            why += " (%s)" % lines[0][:MAX_ERROR]
    return why


def softmax_out(torch):
    """aten::_softmax.out if this torch has it (a structured kernel that
    writes straight into out), else None."""
    try:
        return torch.ops.aten._softmax.out
    except (AttributeError, RuntimeError):
        return None


def sdpa(torch):
    return getattr(torch.nn.functional, "scaled_dot_product_attention", None)


def output_policy(op, torch, ranking=None, dtype="f32"):
    """Whether op writes every output into its preallocated tensor (`out`:
    out= variants and in-place ops on the output) or computes some output
    into a new tensor that is then copied (`copy`). A pure function of op,
    ranking and the installed torch; the route records it at build time.

    layernorm stays `copy` even though aten::native_layer_norm.out exists:
    that out variant is generated (it runs the functional kernel and copies),
    so calling it `out` would hide the copy. The same holds for
    residual_layernorm's Y and cross_entropy's L. topk/stable slices a
    stable sort (into workspaces) and copies the first K columns.
    attention is `out` for the explicit composite (torch without
    scaled_dot_product_attention) and `copy` for SDPA. scan_ordered in
    f16 or bf16 folds in an FP32 workspace and copies (one rounding to
    storage per prefix, as the error model asks).
    """
    if op == "scan_ordered" and dtype != "f32":
        return "copy"
    if op in ("gemm", "gemm_relu", "gemm_gelu", "bmm", "gemv", "add", "gelu_add",
              "sigmoid_pair", "gelu_pair", "swiglu", "rope", "sum", "max",
              "scan_ordered", "scan", "argmax", "sort", "embedding") or op in TEST_OPS:
        return "out"
    if op == "softmax":
        return "out" if softmax_out(torch) is not None else "copy"
    if op in ("rmsnorm", "layernorm", "residual_layernorm", "cross_entropy"):
        return "copy"
    if op == "topk":
        return "copy" if ranking == "stable" else "out"
    if op == "attention":
        return "copy" if sdpa(torch) is not None else "out"
    raise Usage("unknown op %r" % op)


def schedule(op, torch, ranking=None):
    """How op is computed, for the build's schedule (free-form)."""
    if op == "attention":
        if sdpa(torch) is not None:
            return "scaled_dot_product_attention with a boolean bottom-right causal mask, KV heads repeat_interleave'd"
        return "composite: baddbmm(Q, K^T, alpha=1/sqrt(D)) per KV-head group, masked_fill -inf, _softmax.out, bmm into O"
    if op == "scan_ordered":
        return "column loop of torch.add(out=): the sequential FP32 left fold (torch.cumsum on CPU accumulates in double)"
    if op == "topk":
        return "sort(descending, stable=True) then first K" if ranking == "stable" else "torch.topk(largest, sorted)"
    if op == "sort":
        return "torch.sort(stable=True)" if ranking == "stable" else "torch.sort (default, unstable)"
    return ""


def gelu_inplace(torch):
    """tanh-GELU in place on a tensor."""
    nn = torch._C._nn
    g_ = getattr(nn, "gelu_", None)
    if g_ is not None:
        return lambda x: g_(x, approximate="tanh")
    return lambda x: nn.gelu(x, approximate="tanh", out=x)


def make_entry(op, t, o, torch, buffers):
    """Returns a no-argument function that runs op once on the tensors t
    (one buffer set). o holds eps, ranking and dims, and for the test ops
    the visit's shared call count ("calls", a one-element list) and its
    warm set count ("warm_sets"), and the set's pool ("pool"); buffers maps each param to its Buffer of
    the same set. Workspaces are allocated here, outside the timed calls;
    nothing here reads the inputs' values. The tensors of t may live on
    the CPU or the GPU; every workspace is made on their device."""
    F = torch.nn.functional
    eps, ranking, dims = o["eps"], o.get("ranking"), o["dims"]
    if op == "gemm":
        mm, A, B, C = torch.mm, t["A"], t["B"], t["C"]
        return lambda: mm(A, B, out=C)
    if op in ("gemm_relu", "gemm_gelu"):
        # One addmm computes 0.125·(A·B) + 0.25 into C (the scale is
        # applied to the accumulated product, as the table says); the
        # activation then runs in place on C.
        addmm, A, B, C = torch.addmm, t["A"], t["B"], t["C"]
        bias = torch.full((), 0.25, dtype=C.dtype, device=C.device)
        act = (lambda: C.relu_()) if op == "gemm_relu" else (lambda g=gelu_inplace(torch): g(C))

        def gemm_act():
            addmm(bias, A, B, beta=1, alpha=0.125, out=C)
            act()
        return gemm_act
    if op == "bmm":
        bmm, A, B, C = torch.bmm, t["A"], t["B"], t["C"]
        return lambda: bmm(A, B, out=C)
    if op == "gemv":
        mv, A, X, Y = torch.mv, t["A"], t["X"], t["Y"]
        return lambda: mv(A, X, out=Y)
    if op == "add":
        add, A, B, C = torch.add, t["A"], t["B"], t["C"]
        return lambda: add(A, B, out=C)
    if op == "gelu_add":
        add, A, B, C, g = torch.add, t["A"], t["B"], t["C"], gelu_inplace(torch)

        def gelu_add():
            add(A, B, out=C)
            g(C)
        return gelu_add
    if op == "sigmoid_pair":
        sigmoid, neg, X, Y, D = torch.sigmoid, torch.neg, t["X"], t["Y"], t["D"]

        def sigmoid_pair():
            sigmoid(X, out=Y)
            neg(Y, out=D)   # D = σ(X)·(1 − σ(X)), in that order
            D.add_(1)
            D.mul_(Y)
        return sigmoid_pair
    if op == "gelu_pair":
        # Y by torch's tanh-GELU kernel. D by the closed form
        #   t = tanh(k·x·(1 + c·x²)),  k = √(2/π), c = 0.044715
        #   D = 0.5·(1 + t) + 0.5·k·x·(1 − t²)·(1 + 3c·x²)
        # in torch ops on preallocated workspaces (t, a, b).
        gelu, mul, add = torch._C._nn.gelu, torch.mul, torch.add
        X, Y, D = t["X"], t["Y"], t["D"]
        x2, th, a, b = (torch.empty_like(X) for _ in range(4))

        def gelu_pair():
            gelu(X, approximate="tanh", out=Y)
            mul(X, X, out=x2)
            mul(x2, GELU_C, out=th)
            th.add_(1).mul_(X).mul_(SQRT_2_OVER_PI).tanh_()
            mul(th, th, out=a)
            a.neg_().add_(1).mul_(X).mul_(0.5 * SQRT_2_OVER_PI)
            mul(x2, 3 * GELU_C, out=b)
            b.add_(1)
            a.mul_(b)
            add(th, 1, out=D)
            D.mul_(0.5).add_(a)
        return gelu_pair
    if op == "swiglu":
        silu, G, U, Y = torch._C._nn.silu, t["G"], t["U"], t["Y"]

        def swiglu():
            silu(G, out=Y)
            Y.mul_(U)
        return swiglu
    if op == "rope":
        X, C, S, Y = t["X"], t["COS"], t["SIN"], t["Y"]
        R = dims["R"]
        x0, x1 = X[:, 0:R:2], X[:, 1:R:2]
        y0, y1 = Y[:, 0:R:2], Y[:, 1:R:2]
        xt, yt = X[:, R:], Y[:, R:]
        tmp = torch.empty_like(C)
        mul = torch.mul

        def rope():
            mul(x0, C, out=y0)
            mul(x1, S, out=tmp)
            y0.sub_(tmp)
            mul(x0, S, out=y1)
            mul(x1, C, out=tmp)
            y1.add_(tmp)
            yt.copy_(xt)  # the tail is the identity
        return rope
    if op == "sum":
        sum_, X, Y = torch.sum, t["X"], t["Y"]
        return lambda: sum_(X, dim=1, out=Y)
    if op == "max":
        amax, X, Y = torch.amax, t["X"], t["Y"]
        return lambda: amax(X, dim=1, out=Y)
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
    if op == "residual_layernorm":
        add, layer_norm = torch.add, F.layer_norm
        X, R, W, B, Y, H = t["X"], t["R"], t["W"], t["B"], t["Y"], t["H"]
        shape = (X.shape[1],)

        def residual_layernorm():
            add(X, R, out=H)
            Y.copy_(layer_norm(H, shape, W, B, eps))
        return residual_layernorm
    if op == "cross_entropy":
        ce, X, T, L = F.cross_entropy, t["X"], t["T"], t["L"]
        return lambda: L.copy_(ce(X, T, reduction="none"))
    if op == "scan_ordered":
        # torch.cumsum on CPU keeps a double accumulator, so it is not the
        # FP32 left fold; one torch.add per column is. In f16 or bf16 the
        # fold runs in an FP32 workspace (a prefix kept in storage would be
        # rounded again at every step), copied to Y once.
        X, Y = t["X"], t["Y"]
        add = torch.add
        half = X.dtype != torch.float32
        Xf = torch.empty(X.shape, dtype=torch.float32, device=X.device) if half else X
        Yf = torch.empty(Y.shape, dtype=torch.float32, device=Y.device) if half else Y
        cols = [(Yf[:, j - 1], Xf[:, j], Yf[:, j]) for j in range(1, X.shape[1])]
        y0, x0 = Yf[:, 0], Xf[:, 0]

        def scan_ordered():
            if half:
                Xf.copy_(X)  # exact: every f16 and bf16 value is a binary32 value
            y0.copy_(x0)  # the first prefix is the first element
            for prev, x, y in cols:
                add(prev, x, out=y)
            if half:
                Y.copy_(Yf)
        return scan_ordered
    if op == "scan":
        cumsum, X, Y = torch.cumsum, t["X"], t["Y"]
        return lambda: cumsum(X, dim=1, out=Y)
    if op == "argmax":
        # torch.max(dim) keeps the first index of the maximum (it replaces
        # only on a strictly greater value) and returns that element's bits.
        max_, X, V, I = torch.max, t["X"], t["V"], t["I"]
        return lambda: max_(X, dim=1, out=(V, I))
    if op == "topk":
        X, V, I = t["X"], t["V"], t["I"]
        K = V.shape[1]
        if ranking == "stable":
            sort = torch.sort
            sv, si = torch.empty_like(X), torch.empty(X.shape, dtype=torch.int64, device=X.device)
            svk, sik = sv[:, :K], si[:, :K]

            def topk_stable():
                sort(X, dim=1, descending=True, stable=True, out=(sv, si))
                V.copy_(svk)
                I.copy_(sik)
            return topk_stable
        topk = torch.topk
        return lambda: topk(X, K, dim=1, largest=True, sorted=True, out=(V, I))
    if op == "sort":
        sort, X, V, I = torch.sort, t["X"], t["V"], t["I"]
        if ranking == "stable":
            return lambda: sort(X, dim=1, stable=True, out=(V, I))
        return lambda: sort(X, dim=1, out=(V, I))
    if op == "embedding":
        index_select, E, I, Y = torch.index_select, t["E"], t["I"], t["Y"]
        return lambda: index_select(E, 0, I, out=Y)
    if op == "attention":
        return attention_entry(t, dims, torch)

    A, B, C = t["A"], t["B"], t["C"]
    add = torch.add
    # The visit's call count, shared by every set's entry; validation makes
    # two calls per warm set, so the first timed call comes after them.
    calls = o.get("calls")
    first_timed = 2 * o.get("warm_sets", 0) + 1
    if op == "_mutate_input":
        # A maps a sealed file read-only: the write faults (SIGSEGV).
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
        # Clean for the checked calls, then writes past C while timed:
        # only the checks after timing ("end") can see it.
        last = buffers["C"].after[-1:]

        def late_overrun():
            add(A, B, out=C)
            calls[0] += 1
            if calls[0] == first_timed:
                last.bitwise_not_()
        return late_overrun
    if op == "_late_raise":
        def late_raise():
            add(A, B, out=C)
            calls[0] += 1
            if calls[0] == first_timed:
                try:  # raised because of another, as Inductor's BackendCompilerFailed is
                    os.stat("/nonexistent/_late_raise")
                except FileNotFoundError as inner:
                    raise RuntimeError("_late_raise: first timed call raised:\n(see the cause)") from inner
        return late_raise
    if op == "_recompile":
        cache = os.environ["TILEPIPE_CACHE"]  # a KeyError fails the visit: the route has no cache

        def recompile():
            add(A, B, out=C)
            calls[0] += 1
            if calls[0] == first_timed:
                with open(os.path.join(cache, "recompiled.bin"), "wb") as f:
                    f.write(b"a kernel compiled at replay")
        return recompile
    if op == "_skip_output":
        return lambda: None
    if op == "_unrepeatable":
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
    if op == "_skip_fresh" or op == "_fake_fresh":
        every, fresh = (97 if op == "_skip_fresh" else 50), o.get("pool") == "fresh"

        def fraction():
            calls[0] += 1
            if fresh and calls[0] % every == 0:
                if op == "_fake_fresh":
                    C.copy_(A)
                return
            add(A, B, out=C)
        return fraction
    if op == "_read_ahead":
        fresh, state = o.get("pool") == "fresh", {"ready": False}
        answer = torch.empty_like(C)
        if fresh:
            READ_AHEAD.append((A, B, answer, state))

        def helper():
            while True:
                for a, b, c, st in READ_AHEAD:
                    add(a, b, out=c)
                    st["ready"] = True

        def read_ahead():
            calls[0] += 1
            if calls[0] == first_timed:
                import threading
                threading.Thread(target=helper, daemon=True).start()
            if fresh and state["ready"]:
                C.copy_(answer)
                return
            add(A, B, out=C)
        return read_ahead
    if op == "_precompute":
        answer = torch.add(A, B) if o.get("pool") == "fresh" else None

        def precomputed():
            if answer is not None:
                C.copy_(answer)
                return
            add(A, B, out=C)
        return precomputed
    if op == "_memo_content" or op == "_paced_memo":
        a8, b8 = A.view(-1)[:8], B.view(-1)[:8]
        pace, clock = (40000 if op == "_paced_memo" else 0), time.perf_counter_ns

        def memo_content():
            key = a8.numpy().tobytes() + b8.numpy().tobytes()
            hit = MEMO.get(key)
            if hit is not None:
                t0 = clock()
                C.copy_(hit)
                while clock() - t0 < pace:
                    pass
                return
            add(A, B, out=C)
            MEMO[key] = C.clone()
        return memo_content
    if op == "_skip_warm":
        warm = o.get("pool") == "warm"

        def skip_warm():
            calls[0] += 1
            if warm and calls[0] >= first_timed:
                return
            add(A, B, out=C)
        return skip_warm
    if op == "_slow_warm":
        spin, warm = time.perf_counter_ns, o.get("pool") == "warm"

        def slow():
            add(A, B, out=C)
            calls[0] += 1
            if warm and calls[0] >= first_timed:
                t0 = spin()
                while spin() - t0 < 50000:
                    pass
        return slow
    if op == "_liar":
        # The calls are honest; the sample reports are not (LIAR_DIVISOR).
        return lambda: add(A, B, out=C)
    if op == "_chatty":
        # A fake report where protocol 1 put its report: stdout.
        fake = json.dumps({"type": "final", "status": "ok", "reason": "",
                           "checks": {c: "pass" for c in CHECKS}}) + "\n"

        def chatty():
            add(A, B, out=C)
            calls[0] += 1
            if calls[0] == 1:
                sys.stdout.write(fake)
                sys.stdout.flush()
        return chatty
    raise Usage("unknown op %r" % op)


def attention_entry(t, dims, torch):
    """Causal GQA attention; query q (of the last Q positions) sees keys
    k <= q + K - Q. The mask depends only on the dims."""
    Qt, Kt, Vt, O = t["Q"], t["K"], t["V"], t["O"]
    B, Hq, Hkv, Q, K, D, Dv = (dims[n] for n in ("B", "Hq", "Hkv", "Q", "K", "D", "Dv"))
    G = Hq // Hkv
    scale = 1.0 / (D ** 0.5)
    q = torch.arange(Q, device=Qt.device).view(Q, 1)
    k = torch.arange(K, device=Qt.device).view(1, K)
    f = sdpa(torch)
    if f is not None:
        keep = k <= q + (K - Q)  # True: attends
        ri = torch.repeat_interleave

        def attention_sdpa():
            O.copy_(f(Qt, ri(Kt, G, dim=1), ri(Vt, G, dim=1), attn_mask=keep))
        return attention_sdpa
    # Heads h = kv·G + g share KV head kv and are adjacent in memory, so one
    # batched product per (b, kv) covers the G query heads at once.
    masked = (k > q + (K - Q)).repeat(G, 1)  # [G·Q, K]
    Qg = Qt.view(B * Hkv, G * Q, D)
    KgT = Kt.view(B * Hkv, K, D).transpose(1, 2)
    Vg = Vt.view(B * Hkv, K, Dv)
    Og = O.view(B * Hkv, G * Q, Dv)
    # Zeros, not empty: torch 1.13's CPU baddbmm propagates NaN from its
    # input even with beta=0, so uninitialized memory that happens to hold
    # a NaN pattern made the first call's row NaN now and then.
    S = torch.zeros(B * Hkv, G * Q, K, dtype=Qt.dtype, device=Qt.device)
    P = torch.empty_like(S)
    baddbmm, bmm, sm = torch.baddbmm, torch.bmm, softmax_out(torch)
    ninf = float("-inf")

    def attention_composite():
        baddbmm(S, Qg, KgT, beta=0, alpha=scale, out=S)
        S.masked_fill_(masked, ninf)
        sm(S, 2, False, out=P)
        bmm(P, Vg, out=Og)
    return attention_composite


def probe_dims(op):
    """Small valid dims for trying op (a tail for rope, GQA for attention)."""
    if op == "attention":
        return {"B": 1, "Hq": 2, "Hkv": 1, "Q": 2, "K": 3, "D": 4, "Dv": 2}
    if op == "embedding":
        return {"V": 3, "D": 2, "M": 2}
    return {"B": 2, "M": 2, "N": 4, "K": 3, "R": 2}


def try_variant(torch, op, dtype, ranking, device="cpu"):
    """Runs op once on small tensors of dtype on device (cpu or cuda,
    synchronized); returns '' or why it failed."""
    dims = probe_dims(op)
    t = {}
    for name, role, dt, shape in signature(op, dims, dtype):
        tdt = torch_dtype(torch, dt)
        if dt == "i64":
            t[name] = torch.zeros(shape, dtype=tdt, device=device)
        elif role == "input":
            t[name] = torch.full(shape, 0.5, dtype=tdt, device=device)
        else:
            t[name] = torch.empty(shape, dtype=tdt, device=device)
    try:
        make_entry(op, t, {"eps": 1e-5, "ranking": ranking, "dims": dims}, torch, {})()
        if device == "cuda":
            torch.cuda.synchronize()  # a kernel's error surfaces here
    except Exception as e:  # the library cannot run it: the build's reason
        lines = str(e).strip().splitlines()
        return "%s: %s" % (type(e).__name__, lines[0] if lines else "")
    return ""


def probe(torch, device="cpu"):
    """For every op and variant, {"policy": out|copy, "schedule": ...} when
    this torch runs it on device (cpu or cuda), else {"error": why}. The
    route calls this at build time on the case's device, so an op the
    library lacks in some dtype is `unsupported` then, not a failed visit
    later."""
    res = {}
    for op in OPS:
        res[op] = {}
        for dtype, ranking in variants(op):
            err = try_variant(torch, op, dtype, ranking, device)
            key = variant_key(dtype, ranking)
            if err:
                res[op][key] = {"error": err}
            else:
                res[op][key] = {"policy": output_policy(op, torch, ranking, dtype),
                                "schedule": schedule(op, torch, ranking)}
    return res


def align64(n):
    return -(-n // ALIGN) * ALIGN


class MemFile:
    """The memory file of one (param, pool), as replay hands it over: an
    open descriptor, mapped MAP_SHARED, read-only for an input (replay has
    sealed it) and read-write for an output. Set s of the param starts at
    OFFSET(s) = GAP + s·(align64(BYTES) + GAP); the file is OFFSET(SETS)
    bytes rounded up to PAGE, and every byte outside the sets' data is
    canary, 0xA5 ^ (o & 0xff) at file offset o. Replay writes the canary
    and fills the data; the wrapper writes only output data."""

    def __init__(self, param, pool):
        self.name, self.role, self.dtype = param["name"], param["role"], param["dtype"]
        self.nbytes, self.shape = param["bytes"], param["shape"]
        self.pool, self.sets, self.gap = pool["name"], pool["sets"], pool["gap"]
        self.fd = param["fds"][self.pool]
        self.size = -(-self.offset(self.sets) // PAGE) * PAGE
        where = "param %s %s: fd %d" % (self.name, self.pool, self.fd)
        try:
            st = os.fstat(self.fd)
        except OSError as e:
            raise Usage("%s: %s" % (where, e.strerror or e))
        if not stat.S_ISREG(st.st_mode):
            raise Usage("%s: not a memory file" % where)
        if st.st_size != self.size:
            raise Usage("%s holds %d bytes, want %d (%d sets of %d bytes, gap %d)" % (
                where, st.st_size, self.size, self.sets, self.nbytes, self.gap))
        try:
            seals = fcntl.fcntl(self.fd, fcntl.F_GET_SEALS)
        except OSError:
            seals = 0
        need = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        # A fresh input may be sealed against future writes only: replay
        # rewrites it between novel samples through the mapping it made
        # before the seal; no mapping of ours can be writable.
        write_seal = seals & fcntl.F_SEAL_WRITE or (self.pool == "fresh" and seals & F_SEAL_FUTURE_WRITE)
        if self.role == "input" and (seals & need != need or not write_seal):
            raise Usage("%s is not sealed against writes" % where)
        if self.role == "input":
            prot, how = mmap.PROT_READ, "read-only"
        else:
            prot, how = mmap.PROT_READ | mmap.PROT_WRITE, "read-write"
        try:
            # MAP_POPULATE: no call pays for the first touch of a page.
            self.map = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED | mmap.MAP_POPULATE, prot)
        except (OSError, ValueError) as e:
            raise Usage("%s: map %s: %s" % (where, how, getattr(e, "strerror", None) or e))
        os.set_inheritable(self.fd, False)
        self.whole = self.canary_at = self.canary = None
        self.host = self.mirror = None  # --device cuda: see Device

    def offset(self, s):
        """OFFSET(s): where set s's data starts in the file."""
        return self.gap + s * (align64(self.nbytes) + self.gap)

    def buffers(self, torch):
        """One Buffer per set, in set order."""
        return [Buffer(torch, self, s) for s in range(self.sets)]

    def watch(self, torch):
        """Prepares check_guards: the file as bytes, the offset of every
        canary byte (before set 0, and from the end of each set's data to
        the next set or the end of the file) and the byte it must hold."""
        starts = [0] + [self.offset(s) + self.nbytes for s in range(self.sets)]
        ends = [self.offset(s) for s in range(self.sets)] + [self.size]
        self.whole = torch.frombuffer(self.map, dtype=torch.uint8)
        self.canary_at = torch.cat([torch.arange(a, b, dtype=torch.int64) for a, b in zip(starts, ends)])
        self.canary = ((self.canary_at & 0xFF) ^ 0xA5).to(torch.uint8)


class Buffer:
    """Set s of a MemFile, as views of its mapping (nothing is copied):
    typed is the data with the param's dtype and shape, ints the same bytes
    as integers of the element's size (for the poison), data the same bytes
    as uint8, after the canary bytes from the end of the data to the next
    set (or the end of the file). dev is None on the CPU; with --device
    cuda it is the same set's DeviceView, which the entry is given."""

    def __init__(self, torch, f, s):
        self.name, self.role, self.dtype, self.nbytes, self.set = f.name, f.role, f.dtype, f.nbytes, s
        self.file, self.dev = f, None
        off = f.offset(s)
        tdt = torch_dtype(torch, f.dtype)
        idt = {4: torch.int32, 8: torch.int64, 2: torch.int16}[DTYPE_SIZE[f.dtype]]
        self.shape = list(f.shape)
        flat = torch.frombuffer(f.map, dtype=tdt, count=f.nbytes // DTYPE_SIZE[f.dtype], offset=off)
        self.typed = flat.view(self.shape)
        self.ints = flat.view(idt)
        self.data = flat.view(torch.uint8)
        end = f.offset(s + 1) if s + 1 < f.sets else f.size
        self.after = torch.frombuffer(f.map, dtype=torch.uint8, count=end - off - f.nbytes, offset=off + f.nbytes)
        self.ptr = self.typed.data_ptr()
        assert self.typed.is_contiguous() and self.ptr % ALIGN == 0

    def poison(self, value):
        self.ints.fill_(value)


def callee(b):
    """What the entry of b's set computes on: b's views of the memory file
    on the CPU, its views of the device mirror with --device cuda."""
    return b if b.dev is None else b.dev


class DeviceView:
    """Set s of a MemFile's device mirror, as views (nothing is copied):
    data (uint8), typed (the param's dtype and shape) and after (the canary
    bytes up to the next set or the end of the file), at the same offsets
    as the Buffer of the set in the memory file."""

    def __init__(self, torch, f, s):
        off = f.offset(s)
        end = f.offset(s + 1) if s + 1 < f.sets else f.size
        self.data = f.mirror[off:off + f.nbytes]
        self.typed = self.data.view(torch_dtype(torch, f.dtype)).view(list(f.shape))
        self.after = f.mirror[off + f.nbytes:end]
        self.ptr = self.typed.data_ptr()
        assert self.typed.is_contiguous() and self.ptr % ALIGN == 0


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocationProp(ctypes.Structure):
    """CUmemAllocationProp, as cuda.h lays it out (CUDA 10.2 to 13)."""
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("compressionType", ctypes.c_ubyte),
                ("gpuDirectRDMACapable", ctypes.c_ubyte), ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class Driver:
    """The CUDA driver's virtual memory management calls, in torch's own
    (primary) context: what a staged novel sample needs (Device.novel),
    as backend.c makes them."""

    def __init__(self, device):
        self.lib = ctypes.CDLL("libcuda.so.1")
        u64, size, c_int = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_int
        for name, args in (("cuMemGetAllocationGranularity", (ctypes.POINTER(size), ctypes.POINTER(_AllocationProp), c_int)),
                           ("cuMemAddressReserve", (ctypes.POINTER(u64), size, size, u64, u64)),
                           ("cuMemCreate", (ctypes.POINTER(u64), size, ctypes.POINTER(_AllocationProp), u64)),
                           ("cuMemImportFromShareableHandle", (ctypes.POINTER(u64), ctypes.c_void_p, c_int)),
                           ("cuMemMap", (u64, size, size, u64, u64)),
                           ("cuMemSetAccess", (u64, size, ctypes.POINTER(_AccessDesc), size)),
                           ("cuMemRelease", (u64,)),
                           ("cuMemUnmap", (u64, size))):
            f = getattr(self.lib, name)
            f.argtypes, f.restype = args, c_int
        # CU_MEM_ALLOCATION_TYPE_PINNED on this device, exportable as a
        # POSIX descriptor; CU_MEM_ACCESS_FLAGS_PROT_READWRITE.
        self.prop = _AllocationProp(type=1, requestedHandleTypes=1, location=_Location(1, device))
        self.access = _AccessDesc(location=_Location(1, device), flags=3)

    def must(self, rc, what):
        if rc != 0:
            raise Usage("cuda_error: %s: CUDA error %d" % (what, rc))

    def granularity(self):
        g = ctypes.c_size_t()
        self.must(self.lib.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(self.prop), 0), "cuMemGetAllocationGranularity")
        return g.value

    def reserve(self, n):
        d = ctypes.c_ulonglong()
        self.must(self.lib.cuMemAddressReserve(ctypes.byref(d), n, 0, 0, 0), "cuMemAddressReserve (the fresh sets' range)")
        return d.value

    def map(self, at, n, handle, what):
        """Maps handle at at (n bytes), readable and writable here, and
        releases the handle (the mapping holds it)."""
        self.must(self.lib.cuMemMap(at, n, 0, handle, 0), "cuMemMap (%s)" % what)
        self.must(self.lib.cuMemSetAccess(at, n, ctypes.byref(self.access), 1), "cuMemSetAccess (%s)" % what)
        self.must(self.lib.cuMemRelease(handle), "cuMemRelease (%s)" % what)

    def create(self, n):
        h = ctypes.c_ulonglong()
        self.must(self.lib.cuMemCreate(ctypes.byref(h), n, ctypes.byref(self.prop), 0), "cuMemCreate (a placeholder)")
        return h.value

    def import_fd(self, fd):
        h = ctypes.c_ulonglong()
        self.must(self.lib.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd), 1),
                  "cuMemImportFromShareableHandle (a novel sample's staged slots)")
        return h.value

    def unmap(self, at, n, what):
        self.must(self.lib.cuMemUnmap(at, n), "cuMemUnmap (%s)" % what)


class _DeviceBytes:
    """n bytes of device memory at ptr, for torch.as_tensor."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 3}


class Device:
    """The GPU side of a --device cuda visit, as the C CUDA timer
    (prepare/harness/cuda/backend.c) does it. Every warm memory file gets
    one device mirror of the WHOLE file (f.mirror, canary gaps included),
    uploaded once at the start. The fresh sets live in each novel
    sample's staged allocation (novel rule 3, docs/gpu-clock.md, "The
    stager"): replay's monitor lays every fresh file out in it, whole, in
    param order (each at the sum of the sizes before it, the total rounded
    up to the allocation granularity), and this visit maps it at a range
    reserved once, so a fresh file's f.mirror is a fixed view of that
    range. Every set's Buffer gets a DeviceView of its mirror (b.dev),
    which the entries compute on; the fresh entries are made once, on a
    placeholder allocation mapped there until release_placeholder, so no
    launch of their making lands in a sample. Every copy between host and
    device, and every synchronisation, is one of the calls below."""

    def __init__(self, torch, files, sets, l2_flush=False):
        """files: per param, {pool: MemFile}; sets: per pool, the sets'
        {name: Buffer}. l2_flush (the visit's "l2 flush"): a buffer of
        twice the device's L2 is written before every warm sample, on the
        stream the sample's first event is recorded on, so the flush ends
        before the span begins (the monitor flushes after each novel
        sample's upload)."""
        self.torch, self.files = torch, files
        self.flush, self.flushes = None, 0
        self.graph = None  # graph_sample's CUDA graph, captured on first use
        self.no_graph = ""  # why graph samples cannot be taken ('' when they can)
        if l2_flush:
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            if l2 <= 0:
                raise Usage("l2 flush: the device reports an L2 of %d bytes" % l2)
            self.flush = torch.empty((2 * l2 + 3) // 4, dtype=torch.int32, device="cuda")
            sys.stderr.write("torch-eager: l2 flush: %d bytes written before every sample (L2: %d bytes)\n"
                             % (self.flush.numel() * 4, l2))
        for per_pool in files:
            for f in per_pool.values():
                f.host = torch.frombuffer(f.map, dtype=torch.uint8)  # the whole memory file
            f = per_pool["warm"]
            f.mirror = torch.empty(f.size, dtype=torch.uint8, device="cuda")
            f.mirror.copy_(f.host)  # upload, canaries and all
        torch.cuda.synchronize()  # torch's context is current on this thread
        self.driver = Driver(torch.cuda.current_device())
        off, total = [], 0
        for per_pool in files:
            off.append(total)
            total += per_pool["fresh"].size
        g = self.driver.granularity()
        self.range_bytes = -(-total // g) * g
        self.range = self.driver.reserve(self.range_bytes)
        self.driver.map(self.range, self.range_bytes, self.driver.create(self.range_bytes), "a placeholder")
        for per_pool, o in zip(files, off):
            f = per_pool["fresh"]
            f.mirror = torch.as_tensor(_DeviceBytes(self.range + o, f.size), device="cuda")
        for pool in POOLS:
            for bs in sets[pool]:
                for b in bs.values():
                    b.dev = DeviceView(torch, b.file, b.set)
        torch.cuda.synchronize()
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def release_placeholder(self):
        """Unmaps the placeholder the fresh entries were made on: from here
        on, only a novel sample's staged allocation is mapped there, and
        only during its sample."""
        self.torch.cuda.synchronize()
        self.driver.unmap(self.range, self.range_bytes, "a placeholder")

    def sync(self):
        """Waits for the whole device (every stream), not one stream."""
        self.torch.cuda.synchronize()

    def upload(self, outs):
        """Copies these outputs (one set's Buffers) from the memory file up
        to the mirror: the poison before a validation call."""
        for b in outs:
            b.dev.data.copy_(b.data)

    def warm_fill(self):
        """Copies every warm output memory file, whole, up to its mirror:
        serve calls it before the first timed command, when replay has read
        the validated outputs and written its fill over them, so the timed
        calls start from the fill on the device too (backend.c's
        gpu_warm_fill); a call that stops writing after validation leaves
        it, and replay's after-timing comparison names the set."""
        for per_pool in self.files:
            f = per_pool["warm"]
            if f.role == "output":
                f.mirror.copy_(f.host)
        self.torch.cuda.synchronize()

    def download(self, outs):
        """Copies these outputs (one set's Buffers) from the mirror down
        into the memory file, where replay reads them."""
        for b in outs:
            b.data.copy_(b.dev.data)

    def novel(self, fd, calls):
        """A staged novel sample (novel rule 3): the allocation replay's
        monitor made (fd, its POSIX descriptor, which the command carried)
        imported and mapped at the fresh sets' range, the calls timed as
        sample times them, the range unmapped before the answer, so no
        call of the visit reaches the slots once it has answered. Replay's
        span, which holds all of it, is the sample's time; the events are
        its cross-check. The monitor checks the allocation afterwards and
        brings the outputs down (backend.c's gpu_novel_staged)."""
        try:
            h = self.driver.import_fd(fd)
        finally:
            os.close(fd)
        self.driver.map(self.range, self.range_bytes, h, "a novel sample's staged slots")
        ns, err = self.sample(calls, flush=False)  # the whole device synchronised, unless a call raised
        self.driver.unmap(self.range, self.range_bytes, "a novel sample's staged slots")
        return ns, err

    def check(self, suffix):
        """Downloads every warm mirror and compares it with its memory
        file: an input's every byte (the file is sealed), an output's canary
        gaps (MemFile.watch). Reasons as backend.c's gpu_check words them.
        The fresh sets are the monitor's to check, after each sample."""
        for per_pool in self.files:
            for pool in ("warm",):
                f = per_pool[pool]
                d = f.mirror.cpu()  # download the whole mirror
                if f.role == "input":
                    o = first_diff(d, f.host)
                    if o >= 0:
                        raise CheckFailed("guards", "input_written: %s %s byte %d (device)%s" % (f.name, f.pool, o, suffix))
                    continue
                ne = (d[f.canary_at] != f.canary).nonzero()
                if ne.numel():
                    o = int(f.canary_at[int(ne[0, 0])])
                    raise CheckFailed("guards", "guard_overwritten: %s %s byte %d (device)%s" % (f.name, f.pool, o, suffix))

    def sample(self, calls, flush=True):
        """The calls between two CUDA events, then the whole device
        synchronized: (ns between the events, None), or (0, the exception)
        when a call or CUDA raised. Under "l2 flush" (and flush) the flush
        buffer is written first, outside the span."""
        try:
            if flush and self.flush is not None:
                self.flushes += 1
                self.flush.fill_(self.flushes)
            self.start.record()
            for entry in calls:
                entry()
            # The second event after the whole device is idle, as the C
            # timer records it: work on any stream is inside the span.
            self.torch.cuda.synchronize()
            self.end.record()
            self.end.synchronize()
            return int(self.start.elapsed_time(self.end) * 1e6), None
        except Exception as e:  # fails the final report, as on the CPU
            return 0, e

    def graph_sample(self, warm, batch, replays):
        """The span of replays replays of a CUDA graph of batch warm calls
        (call i on warm set i mod the warm sets) between two CUDA events,
        the second after the whole device is idle. The graph is captured
        on first use on a side stream, after one eager call of each warm
        entry there (PyTorch's pattern: lazy initialisation and per-stream
        workspaces happen outside the capture). Under "l2 flush" the flush
        comes first, outside the span. Anything that raises ends the visit
        (exit 2, the error on stderr), as the C timer dies: the context may
        be unusable after a CUDA error."""
        torch = self.torch
        if self.no_graph:
            raise Usage("graph sample: " + self.no_graph)
        try:
            if self.graph is None:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for entry in warm:
                        entry()
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=side):
                    for i in range(batch):
                        warm[i % len(warm)]()
                torch.cuda.current_stream().wait_stream(side)
                self.graph = g
            if self.flush is not None:
                self.flushes += 1
                self.flush.fill_(self.flushes)
            self.start.record()
            for _ in range(replays):
                self.graph.replay()
            torch.cuda.synchronize()
            self.end.record()
            self.end.synchronize()
            return int(self.start.elapsed_time(self.end) * 1e6)
        except Exception as e:
            raise Usage("graph sample: raised %s" % describe_error(e))


# torch.compile (the torch-compile route, docs/torch-compile.md). The same
# visit as eager, but each set's entry calls one function compiled by
# torch.compile(fullgraph=True, dynamic=False, options=compile_options(MODE)), whose Inductor
# and Triton caches are the visit's copy of the captured ones
# ($TILEPIPE_CACHE): the build compiled it (compile_run), replay times it
# unchanged. MODES: the mode the case declares; each mode's style: "out"
# writes the results into the caller's outputs inside the compiled graph
# (Inductor stores straight into them), "copy" returns them from the graph
# and copies them into the outputs after it (the copy is timed): the
# cudagraph modes take "copy", because CUDA graphs are skipped for a graph
# that mutates its inputs.
COMPILE_MODES = {"default": "out", "max-autotune-no-cudagraphs": "out", "max-autotune": "copy"}
# Ops with no compiled form torch.compile can make: the ordered scan is a
# sequential FP32 left fold (N dependent adds; torch.cumsum is a parallel
# scan, which its oracle refuses).
# The ops a --compile closure compiles: one of each kind of generated
# code (pointwise, row reduction, matmul template or extern call, sort,
# scan, attention), whose runtime modules and libraries any op's graph
# loads from.
CLOSURE_COMPILE_OPS = ("add", "softmax", "gemm", "sort", "scan", "attention")
# A build's fresh loads of the compiled cache before its replay check: up
# to this many, stopping at the first that adds nothing (loading may
# build kernels again: max-autotune's tuning at load; docs/torch-compile.md).
COMPILE_SETTLES = 3
COMPILE_UNSUPPORTED = {"scan_ordered": "an ordered (sequential FP32) scan has no torch.compile form but N unrolled adds"}


def compile_env(cache):
    """Points Inductor's and Triton's caches at cache (before torch is
    imported), with one compile worker and no remote cache. HOME and USER
    are set too, the same at build and at replay: a visit's sandbox has no
    user database (getpass.getuser() and "~" would fail with "getpwuid():
    uid not found", seen on an H100), and whatever would be written under
    HOME lands in the cache, where replay sees it."""
    for k, v in (("HOME", os.path.join(cache, "home")),
                 ("USER", "tilepipe"),
                 ("LOGNAME", "tilepipe"),
                 ("TORCHINDUCTOR_CACHE_DIR", os.path.join(cache, "inductor")),
                 ("TRITON_CACHE_DIR", os.path.join(cache, "triton")),
                 ("TRITON_HOME", os.path.join(cache, "triton-home")),
                 ("TORCHINDUCTOR_COMPILE_THREADS", "1"),
                 ("TORCHINDUCTOR_FX_GRAPH_CACHE", "1"),
                 ("TORCHINDUCTOR_AUTOGRAD_CACHE", "1"),
                 ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "0"),
                 ("TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE", "0")):
        os.environ[k] = v
    pin_architecture()


def pin_architecture():
    """Makes platform.architecture() of this interpreter answer without
    the `file` program, as `file` answers for an ELF interpreter. Triton
    keys its compiled driver module (cuda_utils, built by gcc at first
    use) by it: the build sandbox runs `file` and gets ("64bit", "ELF"),
    a visit's sandbox has no `file` and Python falls back to ("64bit",
    ""), so every visit missed the stored module, ran gcc without cc1 and
    failed "BackendCompilerFailed ... CalledProcessError" (on an H100).
    Pinned, the key is the same in both, and no program is run."""
    import platform
    import struct
    if getattr(platform.architecture, "pinned", False):
        return
    unpinned = platform.architecture
    try:
        with open(sys.executable, "rb") as f:
            elf = f.read(4) == b"\x7fELF"
    except OSError:  # an unreadable interpreter: left to Python's answer
        return
    mine = (str(struct.calcsize("P") * 8) + "bit", "ELF" if elf else "")

    def architecture(executable=sys.executable, bits="", linkage=""):
        if executable == sys.executable and not bits and not linkage:
            return mine
        return unpinned(executable, bits, linkage)
    architecture.pinned = True
    platform.architecture = architecture


def pure_op(op, torch, o):
    """(f, inputs, outputs): f computes op's outputs, in signature order,
    from its inputs as torch ops without out= (what torch.compile traces),
    with the semantics of make_entry's eager entry."""
    F, nn = torch.nn.functional, torch._C._nn
    eps, ranking, dims = o["eps"], o.get("ranking"), o["dims"]
    sig = signature(op, dims, o.get("dtype", "f32"))
    ins = [n for n, r, _, _ in sig if r == "input"]
    outs = [n for n, r, _, _ in sig if r == "output"]
    gelu = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731

    def addmm(A, B):
        return torch.addmm(torch.full((), 0.25, dtype=A.dtype, device=A.device), A, B, beta=1, alpha=0.125)

    def gelu_pair(X):
        x2 = X * X
        th = torch.tanh((x2 * GELU_C + 1) * X * SQRT_2_OVER_PI)
        a = (1 - th * th) * X * (0.5 * SQRT_2_OVER_PI) * (x2 * (3 * GELU_C) + 1)
        return gelu(X), (th + 1) * 0.5 + a

    def sigmoid_pair(X):
        y = torch.sigmoid(X)
        return y, (1 - y) * y

    def rope(X, COS, SIN):
        R = dims["R"]
        x0, x1 = X[:, 0:R:2], X[:, 1:R:2]
        rot = torch.stack((x0 * COS - x1 * SIN, x0 * SIN + x1 * COS), dim=2).flatten(1)
        return torch.cat((rot, X[:, R:]), dim=1)

    def residual_layernorm(X, R, W, B):
        h = X + R
        return F.layer_norm(h, (X.shape[1],), W, B, eps), h

    def topk(X):
        K = dims["K"]
        if ranking == "stable":
            v, i = torch.sort(X, dim=1, descending=True, stable=True)
            return v[:, :K], i[:, :K]
        return torch.topk(X, K, dim=1, largest=True, sorted=True)

    def attention(Q, K, V):
        Qn, Kn, G = dims["Q"], dims["K"], dims["Hq"] // dims["Hkv"]
        keep = torch.ones(Qn, Kn, dtype=torch.bool, device=Q.device).tril(Kn - Qn)
        return F.scaled_dot_product_attention(Q, K.repeat_interleave(G, dim=1), V.repeat_interleave(G, dim=1), attn_mask=keep)

    fs = {
        "gemm": lambda A, B: A @ B,
        "gemm_relu": lambda A, B: torch.relu(addmm(A, B)),
        "gemm_gelu": lambda A, B: gelu(addmm(A, B)),
        "bmm": torch.bmm,
        "gemv": torch.mv,
        "add": lambda A, B: A + B,
        "gelu_add": lambda A, B: gelu(A + B),
        "sigmoid_pair": sigmoid_pair,
        "gelu_pair": gelu_pair,
        "swiglu": lambda G, U: nn.silu(G) * U,
        "rope": rope,
        "sum": lambda X: X.sum(dim=1),
        "max": lambda X: X.amax(dim=1),
        "softmax": lambda X: torch.softmax(X, dim=1),
        "rmsnorm": (lambda X, W: F.rms_norm(X, (X.shape[1],), W, eps)) if hasattr(F, "rms_norm") else
                   (lambda X, W: X * torch.rsqrt(X.pow(2).mean(dim=1, keepdim=True) + eps) * W),
        "layernorm": lambda X, W, B: F.layer_norm(X, (X.shape[1],), W, B, eps),
        "residual_layernorm": residual_layernorm,
        "cross_entropy": lambda X, T: F.cross_entropy(X, T, reduction="none"),
        "scan": lambda X: torch.cumsum(X, dim=1),
        "argmax": lambda X: torch.max(X, dim=1),
        "topk": topk,
        "sort": lambda X: torch.sort(X, dim=1, stable=True) if ranking == "stable" else torch.sort(X, dim=1),
        "embedding": lambda E, I: F.embedding(I, E),
        "attention": attention,
    }
    if op not in fs:
        raise Usage("--compile: %s" % COMPILE_UNSUPPORTED.get(op, "no compiled form of %r" % op))
    return fs[op], ins, outs


def compile_options(torch, mode):
    """Inductor's options of mode (torch._inductor.list_mode_options, what
    torch.compile(mode=MODE) applies) with coordinate_descent_tuning off.
    max-autotune turns coordinate descent on, and Inductor re-runs it in
    every process for a kernel whose saved best config was not found by
    it (its autotune cache's found_by_coordesc): it benchmarks and compiles
    neighbouring configs at load, by timings that differ from run to run.
    On an H100 each fresh load of add's captured cache compiled one more
    kernel (settle_added_files [32, 8, 8]), so what a visit launches would
    not be what capture stored. Without it, a load takes the saved best
    config and benchmarks nothing. Recorded in the schedule (options)."""
    import torch._inductor
    opts = dict(torch._inductor.list_mode_options(mode))
    opts["coordinate_descent_tuning"] = False
    return opts


class Compiled:
    """One torch.compile'd function of op for the whole visit (every set
    calls it, so it is traced and loaded once), and the counters that say
    whether Inductor compiled anything in this process."""

    def __init__(self, op, torch, o, mode):
        import torch._dynamo  # noqa: F401  (counters)
        f, self.ins, self.outs = pure_op(op, torch, o)
        self.torch, self.mode, self.style = torch, mode, COMPILE_MODES[mode]
        if self.style == "out":
            k = len(self.ins)

            def body(*a):
                r = f(*a[:k])
                for dst, v in zip(a[k:], r if isinstance(r, tuple) else (r,)):
                    dst.copy_(v)
            fn = body
        else:
            def pure(*a):
                r = f(*a)
                return tuple(r) if isinstance(r, tuple) else (r,)
            fn = pure
        self.options = compile_options(torch, mode)
        self.fn = torch.compile(fn, fullgraph=True, dynamic=False, options=self.options)

    def entry(self, t):
        """The set's entry: its tensors as bases of their own (storage
        offset 0, so every set and the build's tensors have the same
        metadata and the same FX graph cache key)."""
        ins = [base(self.torch, t[n]) for n in self.ins]
        outs = [base(self.torch, t[n]) for n in self.outs]
        fn = self.fn
        if self.style == "out":
            args = ins + outs
            return lambda: fn(*args)

        def copy():
            for dst, v in zip(outs, fn(*ins)):
                dst.copy_(v)
        return copy

    def counters(self):
        from torch._dynamo.utils import counters
        ind, aot, st = counters["inductor"], counters["aot_autograd"], counters["stats"]
        return {"fxgraph_cache_hit": ind.get("fxgraph_cache_hit", 0), "fxgraph_cache_miss": ind.get("fxgraph_cache_miss", 0),
                "fxgraph_cache_bypass": ind.get("fxgraph_cache_bypass", 0),
                "autograd_cache_hit": aot.get("autograd_cache_hit", 0), "autograd_cache_miss": aot.get("autograd_cache_miss", 0),
                "unique_graphs": st.get("unique_graphs", 0), "cudagraph_skips": ind.get("cudagraph_skips", 0)}

    def recompiled(self, when):
        """'' while the one graph of this process was loaded from the
        captured cache (a hit of Inductor's FX graph cache, or of the
        AOTAutograd cache that holds it) and Inductor compiled nothing,
        else the reason that fails the visit."""
        c = self.counters()
        hits = c["fxgraph_cache_hit"] + c["autograd_cache_hit"]
        if c["fxgraph_cache_miss"] or c["fxgraph_cache_bypass"] or c["unique_graphs"] != 1 or hits < 1:
            return ("recompiled: torch.compile did not run the captured graph alone %s (fxgraph_cache_hit %d, "
                    "fxgraph_cache_miss %d, fxgraph_cache_bypass %d, autograd_cache_hit %d, unique_graphs %d; "
                    "want a cache hit, no miss and 1 graph)"
                    % (when, c["fxgraph_cache_hit"], c["fxgraph_cache_miss"], c["fxgraph_cache_bypass"],
                       c["autograd_cache_hit"], c["unique_graphs"]))
        return ""


def base(torch, x):
    """x as a tensor of its own storage at x's first byte (offset 0)."""
    if x.device.type != "cuda" or x.storage_offset() == 0:
        return x
    raw = torch.as_tensor(_DeviceBytes(x.data_ptr(), x.numel() * x.element_size()), device=x.device)
    return raw.view(x.dtype).view(list(x.shape))


def tree_digests(root):
    """{path under root: sha256} of every file under root."""
    import hashlib
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[os.path.relpath(p, root)] = h.hexdigest()
    return out


def build_inputs(torch, op, dims, dtype, device):
    """Tensors of op's signature on device: inputs drawn as the cohort's
    generator would (indices in range), outputs empty."""
    g = torch.Generator(device=device).manual_seed(1)
    t = {}
    for name, role, dt, shape in signature(op, dims, dtype):
        tdt = torch_dtype(torch, dt)
        if role == "output":
            t[name] = torch.empty(shape, dtype=tdt, device=device)
        elif dt == "i64":
            hi = dims["V"] if op == "embedding" else dims["N"]
            t[name] = torch.randint(0, hi, shape, generator=g, device=device)
        else:
            t[name] = torch.randn(shape, generator=g, device=device).to(tdt)
    return t


def compile_run(opts):
    """--compile-run DIR: compiles op (or loads it from DIR's caches) in
    this fresh process, calls it, and prints one JSON line: the first
    call's seconds (trace, compile or load, autotune, first run), the next
    calls' median, the counters, the versions, and every file of DIR this
    process added, removed or changed. The route runs it twice at build:
    on an empty DIR (the compile) and on a copy (the replay it must
    allow: one cache hit, nothing written)."""
    cache, mode = opts["compile_run"], opts["compile"]
    before = tree_digests(cache)
    compile_env(cache)
    t0 = time.perf_counter()
    import torch
    import triton
    imported = time.perf_counter() - t0
    tf32 = opts["policy"] == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    o = {"eps": opts["eps"], "ranking": opts["ranking"], "dims": opts["dims"], "dtype": opts["dtype"]}
    c = Compiled(opts["op"], torch, o, mode)
    entry = c.entry(build_inputs(torch, opts["op"], opts["dims"], opts["dtype"], opts["device"]))
    t1 = time.perf_counter()
    entry()
    torch.cuda.synchronize()
    first = time.perf_counter() - t1
    times = []
    for _ in range(10):
        t2 = time.perf_counter()
        entry()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t2)
    after = tree_digests(cache)
    print(json.dumps({
        "import_s": imported, "first_call_s": first, "next_call_s": sorted(times)[len(times) // 2],
        "counters": c.counters(), "recompiled": c.recompiled("in this run"),
        "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda or "",
        "gpu": torch.cuda.get_device_name(), "mode": mode, "options": c.options, "style": c.style,
        "added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
        "changed": sorted(p for p in before if p in after and before[p] != after[p])}, sort_keys=True))


def first_diff(a, b):
    """Index of the first element where a and b differ, or -1."""
    ne = (a != b).nonzero()
    return int(ne[0, 0]) if ne.numel() else -1


def check_guards(files, suffix=""):
    """Every canary byte of the output files (MemFile.watch) unchanged."""
    for f in files:
        ne = (f.whole[f.canary_at] != f.canary).nonzero()
        if ne.numel():
            o = int(f.canary_at[int(ne[0, 0])])
            raise CheckFailed("guards", "guard_overwritten: %s %s byte %d%s" % (f.name, f.pool, o, suffix))


def check_outputs(outs, poison):
    """The outputs of one set: still the buffers the entry was given (the
    mapped ones, or on the GPU the mirror's views), no element left
    bit-equal to the poison (in the memory file)."""
    for b in outs:
        v = callee(b)
        if v.typed.data_ptr() != v.ptr or list(v.typed.shape) != b.shape:
            raise CheckFailed("poison", "output_reallocated: %s set %d" % (b.name, b.set))
        ne = (b.ints == poison[b.dtype]).nonzero()
        if ne.numel():
            raise CheckFailed("poison", "output_not_overwritten: %s set %d element %d" % (b.name, b.set, int(ne[0, 0])))


def entry_failed(e, where):
    """The reason of a visit whose entry raised e (where: "set S", "during
    timing"), and its whole traceback on stderr, which replay keeps with
    the visit's record: the reason holds a line of it, the traceback says
    where in torch or Inductor it came from."""
    traceback.print_exception(e, file=sys.stderr)
    sys.stderr.flush()
    return "entry_failed: raised %s (%s)" % (describe_error(e), where)


def describe_error(e):
    """An exception from the entry, as the reasons name it: its type and
    the first line of its message, then, for an exception raised while
    handling or because of another (BackendCompilerFailed's "backend=
    'inductor' raised:" says nothing by itself), the innermost cause's type
    and first line after " <- "; at most MAX_ERROR characters of each
    message (the whole traceback goes to stderr: entry_failed)."""
    def first(x):
        lines = str(x).splitlines()
        msg = lines[0].strip() if lines else ""
        if len(msg) > MAX_ERROR:
            msg = msg[:MAX_ERROR] + "..."
        return "%s: %s" % (type(x).__name__, msg)

    root, seen = e, {id(e)}
    while True:
        nxt = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if nxt is None or id(nxt) in seen:
            break
        root = nxt
        seen.add(id(root))
    if root is e:
        return first(e)
    return "%s <- %s" % (first(e), first(root))


class Checks:
    """The state of the four checks, as the C harness keeps it: ran holds
    the checks that passed at least once."""

    def __init__(self):
        self.ran = set()

    def passed(self, check):
        self.ran.add(check)

    def failed(self, check):
        """The report's checks for a failure of check (None: the entry):
        a failed check makes the earlier ones pass and the later ones not
        run; a failed call keeps every check that has passed."""
        if check is None:
            return {c: "pass" if c in self.ran else "not_run" for c in CHECKS}
        i = CHECKS.index(check)
        return {c: "pass" if j < i else "fail" if j == i else "not_run" for j, c in enumerate(CHECKS)}


# COLD[0]: the visit's first call (set 0's first validation call, with
# any lazy initialisation of the library and, on the GPU, its
# synchronisation) in ns on the monotonic clock; reported as the validated
# report's cold_ns and never mixed into a sample.
COLD = [None]


def call_checked(entry, s, outs, files, poison, checks, gpu=None):
    """Steps 2-5 on warm set s: one call and the checks after it. The
    inputs check always passes here: every input is a read-only mapping of
    a file replay sealed, so no write can reach it (a write to the mapping
    faults). With a gpu (Device), the poisoned outputs go up first, the
    call is followed by a synchronisation of the whole device, the outputs
    come down into the memory file, and every mirror is checked before the
    host checks."""
    if gpu is not None:
        gpu.upload(outs)
    t0 = time.perf_counter_ns()
    try:
        entry()
        if gpu is not None:
            gpu.sync()  # a CUDA error of the call surfaces here
    except Exception as e:  # the library raised: the entry failed
        raise CheckFailed(None, entry_failed(e, "set %d" % s))
    finally:
        if COLD[0] is None:
            COLD[0] = time.perf_counter_ns() - t0
    if gpu is not None:
        gpu.download(outs)
        gpu.check("")
    check_guards(files)
    checks.passed("guards")
    check_outputs(outs, poison)
    checks.passed("poison")
    checks.passed("inputs")


def validate_set(entry, s, outs, files, checks, gpu=None):
    """Steps 1-6 on warm set s: poison, call and check, keep the output,
    poison again, call and check, compare. The second call's outputs
    (equal to the first's) stay in the set's buffers (and, with a gpu, in
    its mirrors)."""
    for b in outs:
        b.poison(POISON1[b.dtype])
    call_checked(entry, s, outs, files, POISON1, checks, gpu)
    first = [b.data.clone() for b in outs]
    for b in outs:
        b.poison(POISON2[b.dtype])
    call_checked(entry, s, outs, files, POISON2, checks, gpu)
    for b, kept in zip(outs, first):
        i = first_diff(b.data, kept)
        if i >= 0:
            raise CheckFailed("repeat", "not_repeatable: %s set %d byte %d" % (b.name, s, i))
    checks.passed("repeat")


def valid_name(s):
    return (0 < len(s) <= MAX_NAME and (s[0].isascii() and (s[0].isalpha() or s[0] == "_"))
            and all(c.isascii() and (c.isalnum() or c == "_") for c in s))


def parse_u64(s, top):
    """A plain decimal integer in [0, top], or None."""
    if not s or not s.isascii() or not s.isdigit():
        return None
    v = int(s)
    return v if v <= top else None


def parse_pool(path, n, tok, pools):
    """`pool NAME SETS GAP`: warm first, then fresh, each once."""
    if len(tok) != 4:
        raise Usage('%s:%d: pool: want "pool warm|fresh SETS GAP", got %d fields' % (path, n, len(tok)))
    name = tok[1]
    if name not in POOLS:
        raise Usage('%s:%d: pool: name "%s", want warm or fresh' % (path, n, name))
    if name in pools:
        raise Usage('%s:%d: duplicate key "pool %s"' % (path, n, name))
    if name == "fresh" and "warm" not in pools:
        raise Usage('%s:%d: pool fresh before pool warm' % (path, n))
    sets = parse_u64(tok[2], MAX_SETS)
    if sets is None or sets < MIN_SETS[name]:
        raise Usage('%s:%d: pool %s: sets "%s", want an integer in [%d, %d]' % (path, n, name, tok[2], MIN_SETS[name], MAX_SETS))
    gap = parse_u64(tok[3], MAX_BYTES)
    if gap is None or gap < 1 or gap % ALIGN:
        raise Usage('%s:%d: pool %s: gap "%s", want a positive multiple of %d' % (path, n, name, tok[3], ALIGN))
    pools[name] = {"name": name, "sets": sets, "gap": gap}


def parse_param(path, n, tok, params):
    if len(tok) < 7:
        raise Usage('%s:%d: param: want "param ROLE NAME DTYPE BYTES WARMFD FRESHFD [DIM...]", got %d fields' % (path, n, len(tok)))
    role, name, dtype = tok[1], tok[2], tok[3]
    if role not in ("input", "output"):
        raise Usage('%s:%d: param: role "%s", want input or output' % (path, n, role))
    if not valid_name(name):
        raise Usage('%s:%d: param: bad name "%s"' % (path, n, name))
    if any(p["name"] == name for p in params):
        raise Usage('%s:%d: param: duplicate name "%s"' % (path, n, name))
    if dtype not in DTYPE_SIZE:
        raise Usage('%s:%d: param %s: dtype "%s", want f32, f16, bf16 or i64' % (path, n, name, dtype))
    nbytes = parse_u64(tok[4], MAX_BYTES)
    if nbytes is None:
        raise Usage('%s:%d: param %s: bad byte count "%s"' % (path, n, name, tok[4]))
    if nbytes % DTYPE_SIZE[dtype]:
        raise Usage("%s:%d: param %s: %d bytes is not a multiple of %s's %d" % (path, n, name, nbytes, dtype, DTYPE_SIZE[dtype]))
    # The memory files are fds 5 and up, in the order the file names them.
    fds = {}
    for i, (pool, t) in enumerate(zip(POOLS, tok[5:7])):
        want = FIRST_MEM_FD + len(POOLS) * len(params) + i
        if parse_u64(t, MAX_FD) != want:
            raise Usage('%s:%d: param %s: %s fd "%s", want %d (memory files are fds %d and up, in the order the visit file names them)' % (
                path, n, name, pool, t, want, FIRST_MEM_FD))
        fds[pool] = want
    shape = []
    for t in tok[7:]:
        d = parse_u64(t, MAX_BYTES)
        if d is None:
            raise Usage('%s:%d: param %s: bad dim "%s"' % (path, n, name, t))
        shape.append(d)
    if shape:
        elems = 1
        for d in shape:
            elems *= d
        if elems * DTYPE_SIZE[dtype] != nbytes:
            raise Usage("%s:%d: param %s: dims give %d bytes, want %d" % (path, n, name, elems * DTYPE_SIZE[dtype], nbytes))
    params.append({"role": role, "name": name, "dtype": dtype, "bytes": nbytes,
                   "fds": fds, "shape": shape})


def parse_visit(path, device="cpu"):
    """VISIT.txt of protocol 3: the header, `threads` once, `pool warm` then
    `pool fresh`, then the param lines; on the GPU also `l2 warm` or
    `l2 flush` (at most once; a CPU visit knows no such key, as the C
    harness)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Usage("open %s: %s" % (path, e.strerror or e))
    if not data:
        raise Usage('%s: empty file, want "tilepipe-visit 3"' % path)
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    if lines[-1] == "":
        lines.pop()
    v = {"params": [], "pools": {}}
    for n, ln in enumerate(lines, start=1):
        if "\0" in ln:
            raise Usage("%s:%d: NUL byte in line" % (path, n))
        tok = [t for t in ln.replace("\t", " ").split(" ") if t]
        if n == 1:
            if tok != ["tilepipe-visit", "3"]:
                raise Usage('%s:1: bad header, want "tilepipe-visit 3"' % path)
            continue
        if not tok:
            raise Usage("%s:%d: empty line" % (path, n))
        if tok[0] == "param":
            missing = ['"pool %s"' % p for p in POOLS if p not in v["pools"]]
            if missing:
                raise Usage("%s:%d: param before %s" % (path, n, " and ".join(missing)))
            parse_param(path, n, tok, v["params"])
        elif tok[0] == "pool":
            parse_pool(path, n, tok, v["pools"])
        elif tok[0] == "threads":
            if "threads" in v:
                raise Usage('%s:%d: duplicate key "threads"' % (path, n))
            t = parse_u64(tok[1], MAX_THREADS) if len(tok) == 2 else None
            if t is None or t < 1:
                raise Usage("%s:%d: threads: want one integer in [1, %d]" % (path, n, MAX_THREADS))
            v["threads"] = t
        elif tok[0] == "graph" and device == "cuda":
            if "graph" in v:
                raise Usage('%s:%d: duplicate key "graph"' % (path, n))
            g = parse_u64(tok[1], MAX_GRAPH_CALLS) if len(tok) == 2 else None
            if g is None or g < 1:
                raise Usage("%s:%d: graph: want one integer in [1, %d]" % (path, n, MAX_GRAPH_CALLS))
            v["graph"] = g
        elif tok[0] == "l2" and device == "cuda":
            if "l2" in v:
                raise Usage('%s:%d: duplicate key "l2"' % (path, n))
            if len(tok) != 2 or tok[1] not in ("warm", "flush"):
                raise Usage('%s:%d: l2: want "l2 warm" or "l2 flush"' % (path, n))
            v["l2"] = tok[1]
        else:
            raise Usage('%s:%d: unknown key "%s"' % (path, n, tok[0]))
    if "threads" not in v:
        raise Usage('%s: missing key "threads"' % path)
    for pool in POOLS:
        if pool not in v["pools"]:
            raise Usage('%s: missing key "pool %s"' % (path, pool))
    if not any(p["role"] == "output" for p in v["params"]):
        raise Usage("%s: no output param" % path)
    return v


def check_input_values(torch, op, t, dims, where):
    """Rejects inputs the op is undefined on (the case generator never makes
    them; this makes a wrong input a usage error, not a wrong result).
    where names the set ("warm set 0")."""
    if op == "embedding":
        lo, hi, name = 0, dims["V"], "I"
    elif op == "cross_entropy":
        lo, hi, name = 0, dims["N"], "T"
    else:
        if op in ("argmax", "topk", "sort", "max") and bool(t["X"].isnan().any()):
            raise Usage("input X %s holds NaN; %s is defined only without NaN" % (where, op))
        return
    x = t[name]
    bad = ((x < lo) | (x >= hi)).nonzero()
    if bad.numel():
        i = int(bad[0, 0])
        raise Usage("input %s %s element %d = %d, want in [%d, %d)" % (name, where, i, int(x[i]), lo, hi))


def check_fds():
    """fd 3 (commands) and fd 4 (reports) must be open; nothing this
    process starts inherits them."""
    for fd in (CMD_FD, REPORT_FD):
        try:
            os.fstat(fd)
        except OSError:
            raise Usage("fds %d and %d: want replay's command socket and report pipe (docs/protocol.md, visit)" % (CMD_FD, REPORT_FD))
    for fd in (CMD_FD, REPORT_FD):
        os.set_inheritable(fd, False)


def send(report):
    """Writes one report line on fd 4, with one write call (a line is far
    shorter than PIPE_BUF, so the write is atomic)."""
    line = (json.dumps(report) + "\n").encode("ascii")
    try:
        while line:
            line = line[os.write(REPORT_FD, line):]
    except OSError as e:
        raise Usage("write report on fd %d: %s" % (REPORT_FD, e.strerror or e))


def status_report(kind, reason, checks, threads=None, policy=None):
    """A validated or final report; reason is '' when every check passed."""
    r = {"type": kind, "status": "failed" if reason else "ok", "reason": reason,
         "checks": checks if reason else {c: "pass" for c in CHECKS}}
    if kind == "validated":
        r["threads"], r["output_policy"], r["cold_ns"] = threads, policy, COLD[0] or 0
    return r


class Commands:
    """Replay's commands, one line each, read from fd 3 (a Unix stream
    socket; a pipe works too) with our own buffer (nothing else reads the
    descriptor). A command may carry descriptors (SCM_RIGHTS): on the GPU
    "novel SEQ N" carries its staged slots' allocation (Device.novel);
    next() returns them with the line they came with."""

    def __init__(self, fd):
        self.fd, self.buf, self.fds = fd, b"", []
        dup = os.dup(fd)
        try:
            self.sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            self.sock = None  # a pipe

    def read(self):
        if self.sock is None:
            return os.read(self.fd, 4096)
        space = socket.CMSG_SPACE(4 * 8)
        b, anc, flags, _ = self.sock.recvmsg(4096, space)
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                n = len(data) - len(data) % 4
                self.fds += list(memoryview(data)[:n].cast("i"))
        if flags & socket.MSG_CTRUNC:
            raise Usage("read commands on fd %d: descriptors cut off" % self.fd)
        return b

    def next(self):
        """(line, fds): the next line and the descriptors that came with it."""
        while True:
            i = self.buf.find(b"\n")
            if 0 <= i <= MAX_COMMAND:
                line, self.buf = self.buf[:i], self.buf[i + 1:]
                fds, self.fds = self.fds, []
                for fd in fds:
                    os.set_inheritable(fd, False)
                return line, fds
            if i > MAX_COMMAND or len(self.buf) > MAX_COMMAND:
                raise Usage("command: want one line of at most %d bytes" % MAX_COMMAND)
            try:
                b = self.read()
            except OSError as e:
                raise Usage("read commands on fd %d: %s" % (self.fd, e.strerror or e))
            if not b:
                raise Usage('fd %d closed before "end"' % self.fd)
            self.buf += b


def command_fds(line, fds, want):
    """The one descriptor a command carried (want 1), or none (want 0);
    a command that carried another number ends the visit."""
    if len(fds) != want:
        for fd in fds:
            os.close(fd)
        raise Usage('command "%s": carried %d descriptor(s), want %d'
                    % (line.decode("ascii", "backslashreplace"), len(fds), want))
    return fds[0] if want else None


def parse_command(line, graph=False):
    """(KIND, SEQ, N) of "run SEQ N" or "novel SEQ N", and with graph
    samples (the visit's "graph N") "graph SEQ R"; KIND is b"run",
    b"novel" or b"graph"."""
    tok = line.split(b" ")
    if len(tok) == 3 and tok[0] in ((b"run", b"novel", b"graph") if graph else (b"run", b"novel")):
        seq, n = parse_u64(tok[1].decode("ascii", "replace"), MAX_SEQ), parse_u64(tok[2].decode("ascii", "replace"), MAX_CALLS)
        if seq is not None and n is not None:
            return tok[0], seq, n
    raise Usage('command "%s": want "run SEQ N", "novel SEQ N"%s or "end"'
                % (line.decode("ascii", "backslashreplace"), ', "graph SEQ R"' if graph else ""))


def serve(warm, fresh, divisor, gpu=None, graph_batch=0):
    """Answers "run SEQ N" and "novel SEQ N" until "end": N back-to-back
    calls between two clock reads, answered with the timer's own span.
    Call i of the run samples, counted across them, is warm[i mod K]; a
    novel sample calls fresh sets 0 to N-1 (the novel slots), as replay
    wrote them while the visit was frozen. With a gpu (Device) the span is
    two CUDA events' (Device.sample), and a novel sample's slots come
    staged by replay's monitor, as an allocation whose descriptor the
    command carries (Device.novel): the monitor brings the outputs down
    into the memory files after the answer. "graph SEQ R" (a GPU visit with "graph N") replays a CUDA graph
    of N warm calls R times (Device.graph_sample), answered with N*R
    calls. Returns the reason of the first call that raised or check that
    failed, or '', and the check's name (None for a call)."""
    clock, cycle, islice = time.perf_counter_ns, itertools.cycle, itertools.islice
    # rotations[c]: the warm entries starting at set c, so a sample starts
    # where the last one stopped without skipping through a cycle.
    rotations = [tuple(warm[c:] + warm[:c]) for c in range(len(warm))]
    cursor = 0
    cmds = Commands(CMD_FD)
    failure, failed_check = "", None
    filled = gpu is None  # the warm outputs' fill is on the device
    while True:
        line, fds = cmds.next()
        staged = gpu is not None and line.startswith(b"novel ")
        slots = command_fds(line, fds, 1 if staged else 0)
        if line == b"end":
            return failure, failed_check
        if not filled:
            # Replay wrote its fill over the warm outputs before its first
            # command (docs/protocol.md, step 3).
            gpu.warm_fill()
            filled = True
        kind, seq, n = parse_command(line, graph_batch > 0)
        if kind == b"graph":
            if not 1 <= n <= MAX_GRAPH_REPLAYS or n * graph_batch > MAX_GRAPH_CALLS:
                raise Usage('command "%s": want 1 to %d replays of at most %d calls'
                            % (line.decode("ascii", "backslashreplace"), MAX_GRAPH_REPLAYS, MAX_GRAPH_CALLS))
            ns = gpu.graph_sample(warm, graph_batch, n)
            send({"type": "sample", "seq": seq, "calls": n * graph_batch, "ns": ns // divisor})
            continue
        if kind == b"run":
            calls = islice(cycle(rotations[cursor]), n)
            cursor = (cursor + n) % len(warm)
        else:  # novel
            # Call i on fresh set i, as replay rewrote it while the visit
            # was frozen (docs/protocol4-design.md).
            what = line.decode("ascii", "backslashreplace")
            if n > len(fresh):
                raise Usage('command "%s": want 0 <= N <= %d (the fresh sets)' % (what, len(fresh)))
            calls = fresh[:n]
        if gpu is not None and kind == b"novel":
            if n == 0:
                raise Usage('command "%s": a staged novel sample of no calls' % line.decode("ascii", "backslashreplace"))
            ns, err = gpu.novel(slots, calls)
        elif gpu is not None:
            ns, err = gpu.sample(calls)
        else:
            err = None
            t0 = clock()
            try:
                for entry in calls:
                    entry()
            except Exception as e:  # fails the final report, as a non-zero return does in C
                err = e
            t1 = clock()
            ns = t1 - t0
        if err is not None and not failure:
            failure = entry_failed(err, "during timing")
        send({"type": "sample", "seq": seq, "calls": n, "ns": ns // divisor})


def finish():
    """Ends the visit after its last report, as the C harness does: stdout
    and stderr flushed (so a stray byte on stdout reaches replay), then
    every command byte read and dropped until replay closes fd 3 (replay
    looks for processes left behind and reads the visit's CPU time while
    the timer still holds the visit open), then exit 0 without running any
    exit handler of torch or anything else."""
    for f in (sys.stderr, sys.stdout):
        try:
            f.flush()
        except Exception:
            pass
    try:
        while os.read(CMD_FD, 4096):
            pass
    except OSError:
        pass
    os._exit(0)


def check_params(v, op, sig):
    """The visit's params must be op's signature: names, roles and order,
    then each param's dtype, byte count and (where given) shape."""
    got = [(p["name"], p["role"]) for p in v["params"]]
    if got != [(n, r) for n, r, _, _ in sig]:
        raise Usage("visit params %s do not match op %s's signature %s" % (got, op, [(n, r) for n, r, _, _ in sig]))
    for p, (name, role, dtype, shape) in zip(v["params"], sig):
        nb = DTYPE_SIZE[dtype]
        for d in shape:
            nb *= d
        if p["dtype"] != dtype or p["bytes"] != nb or (p["shape"] and p["shape"] != shape):
            raise Usage("param %s: visit says %s %d bytes %s, op %s wants %s %d bytes %s" % (
                name, p["dtype"], p["bytes"], p["shape"], op, dtype, nb, shape))
        p["shape"] = list(shape)


class UserKernelError(Exception):
    """A user's kernel file (--kernel NAME=torch:FILE) that cannot be
    loaded or breaks the contract: the visit fails with this reason."""


def user_kernel(name):
    """The function `kernel` of the user's file name in $TILEPIPE_CACHE
    (docs/kernels.md, the torch kind), imported without writing bytecode
    (replay fails a visit that adds a file to its cache copy)."""
    import importlib.util
    cache = os.environ.get("TILEPIPE_CACHE", "")
    path = os.path.join(cache, name)
    if not cache or not os.path.isfile(path):
        raise UserKernelError("kernel file %s: not in $TILEPIPE_CACHE (%r)" % (name, cache))
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location("tilepipe_user_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise UserKernelError("kernel file %s: importing it raised %s" % (name, describe_error(e)))
    fn = getattr(mod, "kernel", None)
    if not callable(fn):
        raise UserKernelError("kernel file %s: defines no function kernel(*tensors) (docs/kernels.md)" % name)
    return fn


def user_kernel_args(op, opts):
    """The case's parameters a user's kernel gets as keywords: eps for the
    norms, ranking for topk and sort."""
    if op in EPS_OPS:
        return {"eps": opts["eps"]}
    if op in RANKED_OPS:
        return {"ranking": opts["ranking"]}
    return {}


def user_entry(fn, tensors, kw):
    """One set's entry: the user's function on the set's tensors, in
    signature order, writing the outputs it is given."""
    def call():
        fn(*tensors, **kw)
    return call


def visit(opts):
    v = parse_visit(opts["visit"], opts["device"])
    op, dims = opts["op"], opts["dims"]
    check_params(v, op, signature(op, dims, opts["dtype"]))
    # Every memory file, mapped, before torch starts: a wrong descriptor is
    # a usage error.
    files = [{pool: MemFile(p, v["pools"][pool]) for pool in POOLS} for p in v["params"]]
    threads = v["threads"]
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[k] = str(threads)
    if opts["compile"]:
        # The captured caches, as replay copied them for this visit.
        cache = os.environ.get("TILEPIPE_CACHE", "")
        if not cache or not os.path.isdir(cache):
            raise Usage("--compile: $TILEPIPE_CACHE is %r, want the directory of the visit's copy of the captured cache" % cache)
        compile_env(cache)

    import torch

    cuda = opts["device"] == "cuda"
    if cuda:
        why = cuda_unavailable(torch)
        if why:
            raise Usage("--device cuda: CUDA unavailable: " + why)
        # Before anything runs: TF32 in cuBLAS and cuDNN only under the
        # tf32 policy. The fp16/bf16 reduced-precision reduction flags
        # stay torch's defaults.
        tf32 = opts["policy"] == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32

    # Inputs are read-only mappings; torch warns that it cannot make a
    # read-only tensor of one. No input is written (a write would fault).
    warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)
    torch.set_num_threads(threads)
    if opts["compile"]:
        policy = COMPILE_MODES[opts["compile"]]
    elif opts["user_kernel"]:
        policy = "out"  # the user's function writes the outputs it is given
    else:
        policy = output_policy(op, torch, opts["ranking"], opts["dtype"])
    nthreads = torch.get_num_threads()

    # sets[pool][s]: param name -> Buffer of set s, in signature order.
    sets = {pool: [dict(zip((p["name"] for p in v["params"]), bs))
                   for bs in zip(*(f[pool].buffers(torch) for f in files))]
            for pool in POOLS}
    for pool in POOLS:
        for s, bs in enumerate(sets[pool]):
            check_input_values(torch, op, {n: b.typed for n, b in bs.items()}, dims, "%s set %d" % (pool, s))
    outfiles = [f[pool] for f in files for pool in POOLS if f[pool].role == "output"]
    for f in outfiles:
        f.watch(torch)
    # --device cuda: every memory file mirrored on the GPU, every set's
    # Buffer given its DeviceView (b.dev), which the entries compute on.
    gpu = Device(torch, files, sets, v.get("l2") == "flush") if cuda else None
    outs = {pool: [[b for b in bs.values() if b.role == "output"] for bs in sets[pool]] for pool in POOLS}

    # One entry per set; the test ops count calls over all of them.
    eo = dict(opts, calls=[0], warm_sets=len(sets["warm"]))
    comp = Compiled(op, torch, eo, opts["compile"]) if opts["compile"] else None
    if opts["user_kernel"]:
        try:
            fn = user_kernel(opts["user_kernel"])
        except UserKernelError as e:
            send(status_report("validated", str(e), Checks().failed(None), nthreads, policy))
            finish()
        names = [p["name"] for p in v["params"]]
        kw = user_kernel_args(op, opts)
        entries = {pool: [user_entry(fn, [callee(bs[n]).typed for n in names], kw) for bs in sets[pool]]
                   for pool in POOLS}
    elif comp is not None:
        entries = {pool: [comp.entry({n: callee(b).typed for n, b in bs.items()}) for bs in sets[pool]]
                   for pool in POOLS}
    else:
        entries = {pool: [make_entry(op, {n: callee(b).typed for n, b in bs.items()}, dict(eo, pool=pool), torch,
                                     {n: callee(b) for n, b in bs.items()}) for bs in sets[pool]]
                   for pool in POOLS}
    if gpu is not None:
        gpu.release_placeholder()
        if comp is not None and comp.style == "copy":
            gpu.no_graph = ("torch.compile mode %s replays CUDA graphs of its own (cudagraph trees); "
                            "a graph around them is not captured (its build's schedule.own_graphs tells replay to take none)" % comp.mode)

    checks = Checks()
    try:
        for s, entry in enumerate(entries["warm"]):
            validate_set(entry, s, outs["warm"][s], outfiles, checks, gpu)
    except CheckFailed as e:
        send(status_report("validated", e.reason, checks.failed(e.check), nthreads, policy))
        finish()
    why = comp.recompiled("in validation") if comp is not None else ""
    if why:
        send(status_report("validated", why, checks.failed(None), nthreads, policy))
        finish()
    # Replay's MALLOC_PERTURB_ fill is for the validation calls; timed
    # calls pay no memset per allocation (M_PERTURB is -6 in glibc).
    ctypes.CDLL(None).mallopt(-6, 0)
    send(status_report("validated", "", None, nthreads, policy))

    failure, failed_check = serve(entries["warm"], entries["fresh"], LIAR_DIVISOR if op == "_liar" else 1, gpu, v.get("graph", 0))

    # After timing: the timed calls, then the guards again. The inputs
    # check passes: the input mappings are read-only views of sealed files.
    reason, states = failure, checks.failed(failed_check)
    if not reason and comp is not None:
        reason = comp.recompiled("during timing")
    if not reason and gpu is not None:
        # The warm outputs come down for replay to compare with the
        # validated ones; then every mirror is checked again.
        try:
            gpu.sync()
            for o in outs["warm"]:
                gpu.download(o)
        except Exception as e:
            reason = entry_failed(e, "during timing")
        if not reason:
            try:
                gpu.check(" (after timing)")
            except CheckFailed as e:
                reason, states = e.reason, checks.failed(e.check)
    if not reason:
        try:
            check_guards(outfiles, " (after timing)")
        except CheckFailed as e:
            reason, states = e.reason, checks.failed(e.check)
    send(status_report("final", reason, states))
    finish()


def module_files():
    """Every regular file a module of this process was imported from, and
    for each source file its cached bytecode where that exists."""
    import importlib.util

    out = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if not isinstance(f, str) or not f:
            continue
        try:
            if not os.path.isfile(f):
                continue
            out.add(os.path.realpath(f))
            if f.endswith(".py"):
                c = importlib.util.cache_from_source(f)
                if os.path.isfile(c):
                    out.add(os.path.realpath(c))
        except (OSError, ValueError, NotImplementedError):
            continue
    return out


class Accessed:
    """An audit hook's record of the files a process opened for reading
    and the programs it ran (sys.addaudithook: "open", "subprocess.Popen",
    "os.exec", "os.posix_spawn", "os.spawn"), beside what it maps and
    imports: a compiled graph's load reads files Python opens (a driver's
    C source, a cached module) and runs programs (Triton finds libcuda by
    running /sbin/ldconfig), and replay's sandbox shows a visit only the
    directories of what the listing names. Files opened for writing, and
    anything under /proc, /sys, /dev or the skip directories (scratch
    caches), are left out: they are not the timer's to pin."""

    WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def __init__(self, skip=()):
        self.skip = tuple(os.path.realpath(d) + os.sep for d in skip)
        self.paths = set()

    def add(self, path):
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path:
            return
        try:
            p = os.path.realpath(path)
            if p.startswith(("/proc/", "/sys/", "/dev/") + self.skip) or not os.path.isfile(p):
                return
        except (OSError, ValueError):
            return
        self.paths.add(p)

    def program(self, exe, args, env):
        name = exe
        if name is None and isinstance(args, (list, tuple)) and args:
            name = args[0]
        elif name is None and isinstance(args, (str, bytes, os.PathLike)):
            name = args
        if isinstance(name, os.PathLike):
            name = os.fspath(name)
        if isinstance(name, bytes):
            name = os.fsdecode(name)
        if not isinstance(name, str) or not name:
            return
        if os.sep not in name:
            import shutil
            path = (env or {}).get("PATH") if isinstance(env, dict) else None
            name = shutil.which(name, path=path or os.environ.get("PATH")) or ""
        self.add(name)

    def __call__(self, event, args):
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                return
            if mode is None and isinstance(flags, int) and flags & self.WRITE:
                return
            self.add(path)
        elif event == "subprocess.Popen":
            self.program(args[0], args[1], args[3] if len(args) > 3 else None)
        elif event in ("os.exec", "os.posix_spawn"):
            self.program(args[0], args[1], args[2] if len(args) > 2 else None)
        elif event == "os.spawn":
            self.program(args[1], args[2], args[3] if len(args) > 3 else None)


def closure(opts):
    """Paths of every regular file mapped after torch ran every op in
    every variant once (what any visit could map), and of every module file
    (with its .pyc) that run imported, and of every file it read or program
    it ran (Accessed): replay's sandbox shows a visit only the directories
    holding these. With --device cuda, CUDA is initialised
    first and the ops run on the GPU, so libcuda and the CUDA libraries
    torch loads (cuBLAS, cuDNN, ...) are mapped; without a usable GPU this
    is a usage error ("CUDA unavailable"), never a CPU listing. With
    --compile MODE, every op is also compiled in MODE (small f32 dims) and
    run, with the caches in a temporary directory whose files are not
    listed (a visit's are its copy of the captured cache): what Inductor
    and Triton import and map to load and launch a compiled graph."""
    scratch = None
    if opts["compile"]:
        import shutil
        import tempfile
        scratch = os.path.realpath(tempfile.mkdtemp(prefix="tilepipe-closure-"))
        compile_env(scratch)
    accessed = Accessed([d for d in (scratch, os.environ.get("TMPDIR")) if d])
    sys.addaudithook(accessed)
    import torch

    if opts["device"] == "cuda":
        why = cuda_unavailable(torch)
        if why:
            raise Usage("--device cuda: CUDA unavailable: " + why)
        torch.zeros(1, device="cuda")  # the driver and the CUDA context
        probe(torch, "cuda")
        for op in CLOSURE_COMPILE_OPS if scratch else ():
            import torch._dynamo
            torch._dynamo.reset()  # each op's graph from scratch (one code object compiles them all)
            dims = probe_dims(op)
            o = {"eps": 1e-5, "ranking": "stable" if op in RANKED_OPS else None, "dims": dims, "dtype": "f32"}
            e = Compiled(op, torch, o, opts["compile"]).entry(build_inputs(torch, op, dims, "f32", "cuda"))
            for _ in range(3):  # the cudagraph modes record on a later call
                e()
        torch.cuda.synchronize()
    else:
        probe(torch)
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
    paths |= module_files()
    paths |= accessed.paths
    paths.add(os.path.realpath(sys.executable))
    # A virtual environment's pyvenv.cfg: Python run by the venv's name
    # (bin/python3, a symlink) finds the environment's site-packages only
    # through it, so replay's sandbox must show it, and with it the venv's
    # directory (seen on the H200's /opt/torch/.venv).
    cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    if sys.prefix != sys.base_prefix and os.path.isfile(cfg):
        paths.add(os.path.realpath(cfg))
    paths.add(os.path.realpath(os.path.abspath(__file__)))
    if scratch:
        paths = {p for p in paths if not p.startswith(scratch + os.sep)}
        shutil.rmtree(scratch, ignore_errors=True)
    return sorted(paths)


def parse_args(argv):
    opts = {"op": None, "device": "cpu", "dims": None, "eps": 1e-5,
            "dtype": "f32", "ranking": None, "visit": None, "mode": None,
            "policy": "strict", "compile": None, "compile_run": None, "user_kernel": None}
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
        elif a == "--policy":
            if val not in POLICIES:
                raise Usage("--policy: want one of %s, got %r" % (", ".join(POLICIES), val))
            opts["policy"] = val
        elif a == "--dtype":
            if val not in DTYPES:
                raise Usage("--dtype: want one of %s, got %r" % (", ".join(DTYPES), val))
            opts["dtype"] = val
        elif a == "--ranking":
            if val not in RANKINGS:
                raise Usage("--ranking: want one of %s, got %r" % (", ".join(RANKINGS), val))
            opts["ranking"] = val
        elif a == "--eps":
            try:
                opts["eps"] = float(val)
            except ValueError:
                raise Usage("--eps: not a number: %r" % val)
        elif a == "--dims":
            try:
                opts["dims"] = {k: int(x) for k, x in (kv.split("=", 1) for kv in val.split(","))}
            except ValueError:
                raise Usage("--dims: want NAME=V,..., got %r" % val)
        elif a == "--compile":
            if val not in COMPILE_MODES:
                raise Usage("--compile: want one of %s, got %r" % (", ".join(COMPILE_MODES), val))
            opts["compile"] = val
        elif a == "--compile-run":
            opts["compile_run"], opts["mode"] = val, "compile_run"
        elif a == "--user-kernel":
            if os.path.basename(val) != val or not val or val.startswith("."):
                raise Usage("--user-kernel: want the kernel file's name in $TILEPIPE_CACHE, got %r" % val)
            opts["user_kernel"] = val
        elif a == "--visit":
            opts["visit"] = val
            if opts["mode"] is None:
                opts["mode"] = "visit"
        else:
            raise Usage("unknown argument %r" % a)
    if opts["mode"] is None:
        raise Usage("want --visit VISIT, --closure or --compile-run DIR")
    if opts["compile"] and opts["user_kernel"]:
        raise Usage("--compile and --user-kernel: a user's kernel runs as written")
    if opts["compile"] and opts["device"] != "cuda":
        raise Usage("--compile: the torch-compile route runs on --device cuda alone")
    if opts["mode"] == "compile_run" and not opts["compile"]:
        raise Usage("--compile-run wants --compile MODE")
    if opts["mode"] in ("visit", "compile_run"):
        op = opts["op"]
        if op not in OPS + TEST_OPS:
            raise Usage("--op: want one of %s, got %r" % (", ".join(OPS), op))
        names = dim_names(op)
        d = opts["dims"]
        if d is None or set(d) != set(names) or any(d[n] < 1 for n in names):
            raise Usage("--dims: %s wants %s, positive; got %r" % (op, ",".join(names), d))
        why = check_dims(op, d)
        if why:
            raise Usage("--dims: " + why)
        if (opts["dtype"], opts["ranking"]) not in variants(op) and op not in TEST_OPS:
            raise Usage("%s does not take --dtype %s --ranking %s" % (op, opts["dtype"], opts["ranking"]))
    return opts


def main(argv):
    if sys.byteorder != "little":
        print("wrapper.py: big-endian hosts are not supported", file=sys.stderr)
        return 2
    mode = None
    try:
        opts = parse_args(argv)
        mode = opts["mode"]
        if mode == "closure":
            for p in closure(opts):
                print(p)
            return 0
        if mode == "compile_run":
            compile_run(opts)
            return 0
        check_fds()
        visit(opts)  # ends the process
        raise AssertionError("visit returned")
    except Usage as e:
        print("wrapper.py: %s" % e, file=sys.stderr)
        if mode != "visit":
            return 2
        sys.stderr.flush()
        os._exit(2)
    except BaseException:
        if mode != "visit":
            raise
        # A bug of this wrapper: the traceback on stderr, no exit handlers.
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
