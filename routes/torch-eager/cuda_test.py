#!/usr/bin/env python3
"""Drives wrapper.py through whole visits the way replay does (docs/protocol.md,
"visit (timers)"), for the CUDA path of issue 11.

    python3 routes/torch-eager/cuda_test.py [--device cuda|cpu] [-j JOBS] [--monitor CUDA_TIMER]
                                            [--compile MODE]

Needs torch in the interpreter that runs it (the wrapper runs under the same
one). With --device cuda (the default) and no usable GPU it prints why and
exits 0 having checked only that the route and the wrapper refuse cuda
("CUDA unavailable"); --device cpu runs the same visits on the CPU (a check
of this driver itself, and of the CPU path).

Each visit: replay's memory files (memfds, canaries, inputs sealed) on
fds 5 and up, commands on fd 3 (a socket), reports on fd 4; on the GPU
each novel sample's slots staged by the real monitor (--monitor, the CUDA
timer's --telemetry), as replay stages them under novel rule 3. The driver reads the
validated outputs of every warm set from the memory files and compares them
with the same op computed by torch on the CPU in f32, overwrites them with a
fill pattern, asks for empty and batch samples and a novel sample of every
fresh set (its outputs are read and checked as soon as the answer arrives), sends "end", and checks
that the warm outputs came back equal to the validated ones, that no canary
of a memory file changed and that nothing came on stdout. On the GPU it
also checks that the timer's event span lies inside the driver's own span,
that strict FP32 gemm is far closer to an FP64 product than tf32 gemm,
each test op's exact failure, and that every regular file the visit process
maps was listed by wrapper.py --closure (replay's sandbox shows nothing
else). Exit 1 on any problem, each printed.

--compile MODE runs the same visits through torch.compile (the
torch-compile route, docs/torch-compile.md): each case is first compiled
by `wrapper.py --compile-run` into a cache of its own, as the route's
build does, and every visit gets a fresh copy of it as $TILEPIPE_CACHE;
a visit must load its graph from it (the wrapper's counters) and leave it
unchanged (the driver re-hashes it, as replay does). The adversaries are
then the caches: none at all, an empty one, another case's, each failing
the visit with the exact reason. The closure check leaves out the files
the visit maps from its cache copy (replay shows that directory).
"""

import argparse
import concurrent.futures
import fcntl
import json
import array
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import wrapper  # noqa: E402

# The CPU references run one thread each: a threaded BLAS called from
# several of the driver's threads at once livelocks (OpenBLAS). The
# wrapper sets its own thread variables from the visit file.
for _k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_k] = "1"
import torch  # noqa: E402

torch.set_num_threads(1)

WRAPPER = os.path.join(HERE, "wrapper.py")
ROUTE = os.path.join(HERE, "route")
WARM_SETS, FRESH_SETS = 3, 2     # as routes_test.go: C of add 5x33 is warm byte 4756, 8895
WARM_GAP, FRESH_GAP = 4096, 64
REPORT_TIMEOUT = 300
SLACK_NS = 50_000                # replay's allowance of the timer's ns over its span
FILL = {"f32": 0x7FC01234, "f16": 0x7E12, "bf16": 0x7F12, "i64": -0x1234}  # replay's fill: no poison
INT = {"f32": torch.int32, "f16": torch.int16, "bf16": torch.int16, "i64": torch.int64}

# op, dims, dtype, ranking, policy
CASES = [
    ("add", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("add", {"M": 300, "N": 1000}, "bf16", None, "strict"),
    ("add", {"M": 4096, "N": 4096}, "f32", None, "strict"),  # 64 MiB a set: the mirror checks' cost
    ("gemm", {"M": 64, "N": 48, "K": 1024}, "f32", None, "strict"),
    ("gemm", {"M": 64, "N": 48, "K": 1024}, "f32", None, "tf32"),
    ("gemm", {"M": 128, "N": 96, "K": 64}, "bf16", None, "strict"),
    ("gemm_relu", {"M": 7, "N": 12, "K": 5}, "f32", None, "strict"),
    ("gemm_gelu", {"M": 33, "N": 17, "K": 9}, "f16", None, "strict"),
    ("bmm", {"B": 2, "M": 3, "N": 5, "K": 4}, "f32", None, "strict"),
    ("gemv", {"M": 9, "K": 13}, "f32", None, "strict"),
    ("gelu_pair", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("rope", {"M": 3, "N": 10, "R": 6}, "f32", None, "strict"),
    ("sum", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("softmax", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("rmsnorm", {"M": 5, "N": 33}, "bf16", None, "strict"),
    ("layernorm", {"M": 64, "N": 768}, "f16", None, "strict"),
    ("residual_layernorm", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("cross_entropy", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("scan_ordered", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("scan", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("argmax", {"M": 5, "N": 33}, "f32", None, "strict"),
    ("topk", {"M": 5, "N": 33, "K": 4}, "f32", "stable", "strict"),
    ("topk", {"M": 5, "N": 33, "K": 4}, "f32", "standard", "strict"),
    ("sort", {"M": 5, "N": 33}, "f32", "stable", "strict"),
    ("embedding", {"V": 7, "D": 5, "M": 9}, "f32", None, "strict"),
    ("attention", {"B": 2, "Hq": 4, "Hkv": 2, "Q": 3, "K": 5, "D": 4, "Dv": 3}, "f32", None, "strict"),
    ("attention", {"B": 1, "Hq": 8, "Hkv": 2, "Q": 128, "K": 256, "D": 64, "Dv": 64}, "f32", None, "strict"),
]
# The CPU run (torch 1.13 here) skips what that torch cannot compute.
CPU_CASES = [c for c in CASES if c[2] == "f32" or c[0] in ("add", "rmsnorm")]

ADD = {"M": 5, "N": 33}
# Each test op's failure: (where, reason, checks) per device; "crash" is a
# wrapper killed by SIGSEGV before any report.
P, F, N = "pass", "fail", "not_run"
TEST_OPS = {
    "_overrun_output": {"cuda": ("validated", "guard_overwritten: C warm byte 4756 (device)", (F, N, N, N)),
                        "cpu": ("validated", "guard_overwritten: C warm byte 4756", (F, N, N, N))},
    "_mutate_input": {"cuda": ("validated", "input_written: A warm byte 4096 (device)", (F, N, N, N)),
                      "cpu": ("crash", "", None)},
    "_skip_output": ("validated", "output_not_overwritten: C set 0 element 0", (P, F, N, N)),
    "_realloc_output": ("validated", "output_reallocated: C set 0", (P, F, N, N)),
    "_unrepeatable": ("validated", "not_repeatable: C set 0 byte 0", (P, P, P, F)),
    "_late_overrun": {"cuda": ("final", "guard_overwritten: C warm byte 8895 (device) (after timing)", (F, N, N, N)),
                      "cpu": ("final", "guard_overwritten: C warm byte 8895 (after timing)", (F, N, N, N))},
    "_late_raise": ("final", "entry_failed: raised RuntimeError: _late_raise: first timed call raised: <- FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/_late_raise' (during timing)", (P, P, P, P)),
    # The final report passes; the driver, as replay, finds the fill it
    # wrote after validation still in the warm outputs (on the GPU only
    # because the wrapper uploads that fill before the first sample).
    "_skip_warm": ("after", "warm set 0 C after timing differs from the validated output", None),
}


def align64(n):
    return -(-n // 64) * 64


def canary(size):
    pat = bytes(0xA5 ^ i for i in range(256))
    return bytearray((pat * (size // 256 + 1))[:size])


def to_bytes(t):
    return t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def from_bytes(b, dtype, shape):
    return torch.frombuffer(bytearray(b), dtype=wrapper.torch_dtype(torch, dtype)).view(shape)


class MemFile:
    """One (param, pool) memory file as replay makes it."""

    def __init__(self, name, nbytes, sets, gap, data, seal):
        self.name, self.nbytes, self.sets, self.gap = name, nbytes, sets, gap
        self.size = -(-self.offset(sets) // 4096) * 4096
        self.fd = os.memfd_create("%s" % name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        buf = canary(self.size)
        for s in range(sets):
            o = self.offset(s)
            buf[o:o + nbytes] = data[s] if data else bytes(nbytes)
        os.ftruncate(self.fd, self.size)
        os.pwrite(self.fd, bytes(buf), 0)
        if seal:
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)

    def offset(self, s):
        return self.gap + s * (align64(self.nbytes) + self.gap)

    def read(self, s):
        return os.pread(self.fd, self.nbytes, self.offset(s))

    def write(self, s, b):
        os.pwrite(self.fd, b, self.offset(s))

    def canary_error(self):
        b = os.pread(self.fd, self.size, 0)
        want = canary(self.size)
        o = 0
        for s in range(self.sets + 1):
            end = self.offset(s) if s < self.sets else self.size
            if b[o:end] != want[o:end]:
                i = next(i for i in range(o, end) if b[i] != want[i])
                return "canary changed: %s byte %d" % (self.name, i)
            o = end + self.nbytes
        return ""


def make_inputs(op, dims, dtype, seed):
    """One set's inputs: name -> CPU tensor of the param's dtype."""
    g = torch.Generator().manual_seed(seed)
    t = {}
    for name, role, dt, shape in wrapper.signature(op, dims, dtype):
        if role != "input":
            continue
        if dt == "i64":
            hi = dims["V"] if op == "embedding" else dims["N"]
            t[name] = torch.randint(0, hi, shape, generator=g, dtype=torch.int64)
        else:
            t[name] = torch.randn(shape, generator=g).to(wrapper.torch_dtype(torch, dt))
    return t


REF_LOCK = threading.Lock()  # one CPU reference at a time: OpenBLAS livelocks on concurrent callers


def reference(op, dims, dtype, ranking, inputs, eps=1e-5):
    """The op computed by wrapper.make_entry on the CPU in f32 (i64 kept)."""
    with REF_LOCK:
        return _reference(op, dims, dtype, ranking, inputs, eps)


def _reference(op, dims, dtype, ranking, inputs, eps):
    t = {}
    for name, role, dt, shape in wrapper.signature(op, dims, dtype):
        if role == "input":
            x = inputs[name]
            t[name] = x if dt == "i64" else x.float()
        else:
            t[name] = torch.empty(shape, dtype=torch.int64 if dt == "i64" else torch.float32)
    wrapper.make_entry(op, t, {"eps": eps, "ranking": ranking, "dims": dims}, torch, {})()
    return {n: t[n] for n, r, _, _ in wrapper.signature(op, dims, dtype) if r == "output"}


TOL = {"f32": 2e-4, "bf16": 3e-2, "f16": 5e-3, "tf32": 3e-3}  # of max(1, max |ref|)


def compare(what, got, want, tol):
    """'' or how got (any dtype) misses want (f32 or i64) by more than tol
    (a TOL key)."""
    if want.dtype == torch.int64:
        if not torch.equal(got, want):
            i = int((got != want).view(-1).nonzero()[0, 0])
            return "%s: element %d = %d, want %d" % (what, i, int(got.view(-1)[i]), int(want.view(-1)[i]))
        return ""
    g, w = got.double(), want.double()
    scale = max(1.0, float(w.abs().max()))
    err = float((g - w).abs().max()) / scale
    if not err <= TOL[tol]:  # NaN too
        return "%s: max error %.3g of max |ref| %.3g, want <= %.3g" % (what, err, scale, TOL[tol])
    return ""


def send_fds(sock, data, fds):
    """data on sock, fds (a list) carried with its first byte."""
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    n = sock.sendmsg([data], anc)
    if n < len(data):
        sock.sendall(data[n:])


class Monitor:
    """Replay's GPU monitor (the CUDA timer's --telemetry: its fd 0 and
    fd 1 one Unix stream socket), as replay drives its stager
    (docs/gpu-clock.md, "The stager"): the fresh files opened once, then
    per novel sample a staged allocation whose descriptor goes to the
    visit with the command, the probe, the unstaging."""

    def __init__(self, exe):
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.p = subprocess.Popen([exe, "--telemetry"], stdin=child, stdout=child, stderr=subprocess.PIPE)
        child.close()
        self.buf, self.fds = b"", []
        first = self.line()
        if first.get("telemetry") != "nvml":
            raise RuntimeError("monitor's first line %r" % first)

    def line(self):
        while b"\n" not in self.buf:
            b, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(16))
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    self.fds += list(memoryview(data)[:len(data) - len(data) % 4].cast("i"))
            if not b:
                raise RuntimeError("monitor exited: %s" % self.p.stderr.read().decode("utf-8", "replace")[-500:])
            self.buf += b
        ln, self.buf = self.buf.split(b"\n", 1)
        return json.loads(ln)

    def ask(self, req, fds=()):
        send_fds(self.sock, (req + "\n").encode(), list(fds))
        return self.line()

    def open(self, sets, gap, files):
        """files: (name, role, bytes, fd) in param order."""
        req = "open %d %d " % (sets, gap) + " ".join("%s %s %d" % f[:3] for f in files)
        return self.ask(req, [f[3] for f in files])["opened"]

    def stage(self, seq, n):
        a = self.ask("stage %d %d 0" % (seq, n))
        if a.get("staged") != seq or len(self.fds) != 1:
            raise RuntimeError("stage %d: %r with %d descriptors" % (seq, a, len(self.fds)))
        fd, self.fds = self.fds[0], []
        return fd

    def unstage(self, seq):
        """(the in-span probe's idle ns, the monitor's reason)."""
        p = self.ask("unstage %d" % seq)
        u = self.line()
        if p.get("probed") != seq or u.get("unstaged") != seq:
            raise RuntimeError("unstage %d: %r, %r" % (seq, p, u))
        return p["idle_ns"], u["reason"]

    def close(self):
        self.sock.close()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.p.stderr.close()


class Timer:
    """One wrapper process, fds 3 (a socket) and 4 and the memory files
    laid out as replay lays them out."""

    def __init__(self, argv, fds, tmp, env=None):
        self.cmd, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd_r = child.detach()
        self.rep_r, rep_w = os.pipe()
        order = [cmd_r, rep_w] + fds

        def child():
            tmp_fds = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200) for fd in order]
            for i, fd in enumerate(tmp_fds):
                os.dup2(fd, 3 + i)  # inheritable
        self.out = open(os.path.join(tmp, "stdout"), "w+b")
        self.err = open(os.path.join(tmp, "stderr"), "w+b")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                                  close_fds=False, preexec_fn=child, env=env)
        os.close(cmd_r)
        os.close(rep_w)
        self.buf = b""

    def report(self):
        """The next report line (a dict), or None when fd 4 closed."""
        deadline = time.monotonic() + REPORT_TIMEOUT
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.rep_r], [], [], left)[0]:
                raise RuntimeError("no report within %d s" % REPORT_TIMEOUT)
            b = os.read(self.rep_r, 65536)
            if not b:
                return None
            self.buf += b
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, line, fd=None):
        """Sends line (carrying fd, if given); returns (the report, the
        span from writing to reading in ns)."""
        t0 = time.perf_counter_ns()
        send_fds(self.cmd, (line + "\n").encode(), [fd] if fd is not None else [])
        r = self.report()
        return r, time.perf_counter_ns() - t0

    def mapped_files(self):
        """The regular files the process maps now."""
        out = set()
        with open("/proc/%d/maps" % self.p.pid) as f:
            for ln in f:
                parts = ln.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and not parts[5].strip().endswith("(deleted)"):
                    p = parts[5].strip()
                    if os.path.isfile(p):
                        out.add(os.path.realpath(p))
        return out

    def close(self):
        """Closes fd 3, waits for the exit; (exit status, stdout, stderr)."""
        self.cmd.close()
        try:
            rc = self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        os.close(self.rep_r)
        self.out.seek(0)
        self.err.seek(0)
        return rc, self.out.read(), self.err.read().decode("utf-8", "replace")


def wrapper_args(op, dims, dtype, ranking, device, policy):
    args = ["--op", op, "--device", device, "--policy", policy,
            "--dims", ",".join("%s=%d" % (d, dims[d]) for d in wrapper.dim_names(op)), "--dtype", dtype]
    if ranking:
        args += ["--ranking", ranking]
    return args


MONITOR = None  # --monitor: the CUDA timer whose --telemetry stages the GPU's novel slots
COMPILE = None  # --compile: the torch.compile mode every visit runs in
COMPILED = {}   # case args -> its compiled cache directory (compile_cache)
COMPILED_LOCK = threading.Lock()


def compile_cache(op, dims, dtype, ranking, policy, root):
    """The cache directory of the case compiled by wrapper.py --compile-run
    (as the torch-compile route's build makes it), made once per case;
    (dir, the run's JSON answer)."""
    key = json.dumps([op, dims, dtype, ranking, policy], sort_keys=True)
    with COMPILED_LOCK:
        if key in COMPILED:
            return COMPILED[key]
    d = tempfile.mkdtemp(prefix="compiled-", dir=root)
    argv = [sys.executable, WRAPPER, "--compile-run", d] + wrapper_args(op, dims, dtype, ranking, "cuda", policy) + ["--compile", COMPILE]

    def compile_run():
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=1200)
        if p.returncode != 0:
            raise RuntimeError("--compile-run: exit %d: %s" % (p.returncode, p.stderr.decode()[-2000:]))
        return json.loads(p.stdout.decode().strip().splitlines()[-1])
    got = (d, compile_run())
    # As the route's build: fresh processes on the cache until one adds
    # nothing (loading may build kernels again: autotuning at load).
    for _ in range(wrapper.COMPILE_SETTLES):
        settle = compile_run()
        if settle["recompiled"]:
            raise RuntimeError("--compile-run on the compiled cache: %s" % settle["recompiled"])
        if not settle["added"]:
            break
    with COMPILED_LOCK:
        COMPILED[key] = got
    return got


def tree(d):
    """{path: sha256} of every file under d."""
    return wrapper.tree_digests(d)


def run_visit(op, dims, dtype, ranking, device, policy, seed=1, closure=None, cache=None, expect=None):
    """One visit as replay drives it; returns (problems, info). Under
    --compile, cache is the visit's cache: a compiled cache directory to
    copy, "" for an empty one, None for no $TILEPIPE_CACHE at all; expect,
    the failure the visit must end with (as TEST_OPS says one), or None."""
    sig_op = "add" if op in wrapper.TEST_OPS else op
    sig = wrapper.signature(sig_op, dims, dtype)
    sets = {"warm": [make_inputs(sig_op, dims, dtype, seed + s) for s in range(WARM_SETS)],
            "fresh": [make_inputs(sig_op, dims, dtype, seed + 100 + s) for s in range(FRESH_SETS)]}
    gaps = {"warm": WARM_GAP, "fresh": FRESH_GAP}
    files, lines, fds = {}, [], []
    for name, role, dt, shape in sig:
        nbytes = wrapper.DTYPE_SIZE[dt]
        for d in shape:
            nbytes *= d
        fdnums = []
        for pool in ("warm", "fresh"):
            data = [to_bytes(x[name]) for x in sets[pool]] if role == "input" else None
            m = MemFile("%s.%s" % (name, pool), nbytes, len(sets[pool]), gaps[pool], data, role == "input")
            files[name, pool] = m
            fdnums.append(5 + len(fds))
            fds.append(m.fd)
        lines.append("param %s %s %s %d %d %d %s" % (role, name, dt, nbytes, fdnums[0], fdnums[1], " ".join(map(str, shape))))
    problems, info = [], {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        vf = os.path.join(tmp, "visit.txt")
        with open(vf, "w") as f:
            f.write("tilepipe-visit 3\nthreads 1\npool warm %d %d\npool fresh %d %d\n%s\n" % (
                WARM_SETS, WARM_GAP, FRESH_SETS, FRESH_GAP, "\n".join(lines)))
        argv = [sys.executable, WRAPPER] + wrapper_args(op, dims, dtype, ranking, device, policy) + ["--visit", vf]
        env, visit_cache, before = None, None, None
        if COMPILE:
            argv[-2:-2] = ["--compile", COMPILE]
            env = dict(os.environ)
            env.pop("TILEPIPE_CACHE", None)
            if cache is not None:
                visit_cache = os.path.join(tmp, "cache")
                if cache:
                    shutil.copytree(cache, visit_cache)
                else:
                    os.mkdir(visit_cache)
                before = tree(visit_cache)
                env["TILEPIPE_CACHE"] = visit_cache
        info = {}
        tm = Timer(argv, fds, tmp, env)
        mon = None
        try:
            if device == "cuda":
                mon = Monitor(MONITOR)
                mon.open(FRESH_SETS, FRESH_GAP, [(name, role, files[name, "fresh"].nbytes, files[name, "fresh"].fd) for name, role, _, _ in sig])
            tol = "tf32" if policy == "tf32" else dtype
            problems, info = drive(tm, op, sig_op, dims, tol, ranking, device, sets, files, sig, closure, mon, visit_cache, expect)
        finally:
            rc, out, err = tm.close()
            if visit_cache is not None and "want" not in info:
                after = tree(visit_cache)
                moved = sorted(set(after) ^ set(before)) + sorted(k for k in before if k in after and before[k] != after[k])
                if moved and cache:
                    problems.append("the visit changed its cache: %s (%d files)" % (moved[0], len(moved)))
            if mon is not None:
                mon.close()
            for fd in fds:
                os.close(fd)
    info["exit"], info["stderr"], info["wall"] = rc, err, time.monotonic() - t0
    if out:
        problems.append("stdout: %r, want nothing" % out[:200])
    if info.get("want_usage"):
        if rc != 2 or info["want_usage"] not in err:
            problems.append("exit %d stderr %r, want 2 and %r" % (rc, err.strip()[-500:], info["want_usage"]))
    elif info.get("want_crash"):
        if rc != -11:
            problems.append("exit %d, want SIGSEGV (-11)" % rc)
    elif rc != 0:
        problems.append("exit %d, want 0; stderr: %s" % (rc, err.strip()[-2000:]))
    return problems, info


# --compile's adversaries: the visit's cache (None: no $TILEPIPE_CACHE,
# "": an empty directory, "another case's": add 5x33 f32's compiled cache
# for add 300x1000 bf16) and the failure each must end with. The two that
# compile anew fail after validation's calls, named by the counters.
RECOMPILED = ("validated", "recompiled: torch.compile did not run the captured graph alone in validation "
              "(fxgraph_cache_hit 0, fxgraph_cache_miss 1, fxgraph_cache_bypass 0, autograd_cache_hit 0, unique_graphs 1; "
              "want a cache hit, no miss and 1 graph)", (P, P, P, P))
COMPILE_ADVERSARIES = [
    ("compile: no $TILEPIPE_CACHE", None, ("usage", "--compile: $TILEPIPE_CACHE is '', want the directory of the visit's copy of the captured cache", None)),
    ("compile: an empty cache", "", RECOMPILED),
    ("compile: another case's cache", "another case's", RECOMPILED),
]


def drive(tm, op, sig_op, dims, tol, ranking, device, sets, files, sig, closure, mon, visit_cache=None, expect=None):
    """Replay's side of one visit; tol is the outputs' TOL key."""
    dtype = "f32" if tol == "tf32" else tol
    problems, info = [], {}
    outs = [(n, dt, sh) for n, r, dt, sh in sig if r == "output"]
    test = op in wrapper.TEST_OPS
    want = None
    if test:
        want = TEST_OPS[op]
        want = want[device] if isinstance(want, dict) else want
    if expect is not None:
        want, info["want"] = expect, True
    v = tm.report()
    if want and want[0] == "usage":
        info["want_usage"] = want[1]
        if v is not None:
            problems.append("validated %r, want a usage error (exit 2) before any report" % v)
        return problems, info
    if want and want[0] == "crash":
        info["want_crash"] = True
        if v is not None:
            problems.append("validated %r, want the wrapper killed by SIGSEGV" % v)
        return problems, info
    if v is None:
        return ["fd 4 closed before the validated report"], info
    info["validated"] = v
    if want and want[0] == "validated":
        if v["status"] != "failed" or v["reason"] != want[1] or tuple(v["checks"][c] for c in wrapper.CHECKS) != want[2]:
            problems.append("validated %s, want failed %r %s" % (v, want[1], want[2]))
        return problems, info
    if v["status"] != "ok":
        return ["validated %s, want ok" % v], info
    # Replay: every warm set's outputs against the oracle, kept, then filled.
    validated = {}
    for s, ins in enumerate(sets["warm"]):
        ref = None if test else reference(sig_op, dims, dtype, ranking, ins)
        for n, dt, sh in outs:
            b = files[n, "warm"].read(s)
            validated[n, s] = b
            if ref is not None:
                e = compare("warm set %d %s" % (s, n), from_bytes(b, dt, sh), ref[n], tol)
                if e:
                    problems.append(e)
            files[n, "warm"].write(s, to_bytes(torch.full(sh, FILL[dt], dtype=INT[dt])))
    info["warm"] = validated
    # Samples: empty, batches, then a novel sample of every fresh set.
    seq, samples = 0, []
    for n in (0, 0, 1, 2, 4, 16, 3, FRESH_SETS):
        kind = "novel" if len(samples) == 7 else "run"
        slots = mon.stage(seq, n) if kind == "novel" and mon is not None else None
        r, span = tm.command("%s %d %d" % (kind, seq, n), slots)
        if slots is not None:
            os.close(slots)
            idle, reason = mon.unstage(seq)
            info["novel_idle_ns"] = idle
            if reason:
                problems.append("novel %d %d: the monitor found %s" % (seq, n, reason))
        if r is None or r.get("type") != "sample" or r.get("seq") != seq or r.get("calls") != n:
            return problems + ["%s %d %d: answer %r" % (kind, seq, n, r)], info
        samples.append((kind, n, r["ns"], span))
        if r["ns"] > span + SLACK_NS and op != "_liar":
            problems.append("%s %d %d: the timer says %d ns, the driver's span is %d ns" % (kind, seq, n, r["ns"], span))
        if n > 0 and r["ns"] <= 0 and op != "_late_raise":
            problems.append("%s %d %d: %d ns" % (kind, seq, n, r["ns"]))
        if kind == "novel" and not test:
            for s, ins in enumerate(sets["fresh"]):
                ref = reference(sig_op, dims, dtype, ranking, ins)
                for nm, dt, sh in outs:
                    e = compare("fresh set %d %s" % (s, nm), from_bytes(files[nm, "fresh"].read(s), dt, sh), ref[nm], tol)
                    if e:
                        problems.append(e)
        seq += 1
    info["samples"] = samples
    r, _ = tm.command("end")
    if closure is not None:
        mapped = {p for p in tm.mapped_files() if not (visit_cache and p.startswith(os.path.realpath(visit_cache) + os.sep))}
        missing = sorted(mapped - closure)
        if missing:
            problems.append("mapped by the visit, not in the closure listing: %s" % missing)
    info["final"] = r
    if want and want[0] == "final":
        if r is None or r["status"] != "failed" or r["reason"] != want[1] or tuple(r["checks"][c] for c in wrapper.CHECKS) != want[2]:
            problems.append("final %s, want failed %r %s" % (r, want[1], want[2]))
        return problems, info
    if r is None or r.get("type") != "final" or r.get("status") != "ok":
        return problems + ["final %r, want ok" % r], info
    after = []
    for (n, s), b in validated.items():
        if files[n, "warm"].read(s) != b:
            after.append("warm set %d %s after timing differs from the validated output" % (s, n))
    if want and want[0] == "after":
        if want[1] not in after:
            problems.append("after timing %r, want %r among them" % (after, want[1]))
    else:
        problems += after
    for m in files.values():
        e = m.canary_error()
        if e:
            problems.append(e)
    return problems, info


def route_build(case, work):
    p = subprocess.run([ROUTE, "build", "--case", case, "--workdir", work], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("route build: exit %d: %s" % (p.returncode, p.stderr.decode()))
    return json.loads(p.stdout)


def check_route(cuda_ok):
    """describe's devices, and a cuda build: built with --device cuda
    --policy where CUDA works, else failed "CUDA unavailable"."""
    problems = []
    d = json.loads(subprocess.run([ROUTE, "describe"], stdout=subprocess.PIPE, check=True).stdout)
    want = ["cpu", "cuda"] if torch.version.cuda else None
    if d.get("devices") != want:
        problems.append("describe devices %r, want %r" % (d.get("devices"), want))
    dims = {"M": 7, "N": 12, "K": 5}
    sig = [{"name": n, "role": r, "dtype": dt, "shape": sh} for n, r, dt, sh in wrapper.signature("gemm", dims)]
    with tempfile.TemporaryDirectory() as tmp:
        for policy in ("tf32", None):
            case = {"id": "gemm", "op": "gemm", "dims": dims, "dtype": "f32", "pattern": "normal",
                    "seed": 1, "device": "cuda", "signature": sig}
            if policy:
                case["policy"] = policy
            cf = os.path.join(tmp, "case.json")
            with open(cf, "w") as f:
                json.dump(case, f)
            work = tempfile.mkdtemp(dir=tmp)
            b = route_build(cf, work)
            if not cuda_ok:
                if b["status"] != "failed" or not b["reason"].startswith("CUDA unavailable: "):
                    problems.append("cuda build without CUDA: %s %r, want failed \"CUDA unavailable: ...\"" % (b["status"], b["reason"]))
                continue
            args = b["process"]["args"] if b["process"] else []
            if b["status"] != "built" or args[:6] != ["--op", "gemm", "--device", "cuda", "--policy", policy or "strict"]:
                problems.append("cuda build (policy %s): status %s reason %r args %s" % (policy, b["status"], b["reason"], args))
    return problems


def closure_files(args):
    p = subprocess.run([sys.executable, WRAPPER] + args + ["--closure"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    return p.returncode, set(p.stdout.decode().split()), p.stderr.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("-j", type=int, default=4)
    ap.add_argument("-v", action="store_true", help="print each visit's stderr")
    ap.add_argument("--monitor", help="the CUDA timer (prepare/harness) whose --telemetry stages the novel slots (--device cuda)")
    ap.add_argument("--compile", choices=tuple(wrapper.COMPILE_MODES), help="run every visit through torch.compile in this mode")
    a = ap.parse_args()
    global MONITOR, COMPILE
    MONITOR, COMPILE = a.monitor, a.compile
    if COMPILE and a.device != "cuda":
        ap.error("--compile runs on --device cuda alone")
    why = wrapper.cuda_unavailable(torch)
    failed = []

    def report(name, probs):
        print("%s %s" % ("FAIL" if probs else "ok  ", name))
        for p in probs:
            print("      " + p)
        if probs:
            failed.append(name)

    if not COMPILE:
        report("route describe and cuda build", check_route(not why))
    rc, closure, err = closure_files(wrapper_args("gemm", {"M": 7, "N": 12, "K": 5}, "f32", None, a.device, "strict") +
                                     (["--compile", COMPILE] if COMPILE else []))
    if a.device == "cuda" and why:
        report("closure --device cuda without CUDA", [] if rc == 2 and "CUDA unavailable" in err else
               ["exit %d stderr %r, want 2 and CUDA unavailable" % (rc, err)])
        print("CUDA unavailable here (%s): no cuda visits run" % why)
        return 1 if failed else 0
    report("closure listing (%d files)" % len(closure), [] if rc == 0 and closure else ["exit %d: %s" % (rc, err.strip()[-2000:])])
    if a.device == "cuda" and not a.monitor:
        report("--monitor", ["--device cuda needs --monitor CUDA_TIMER: the novel slots are staged by it"])
        return 1

    jobs = []
    root = tempfile.mkdtemp(prefix="cuda-test-")
    for op, dims, dtype, ranking, policy in (CASES if a.device == "cuda" else CPU_CASES):
        if COMPILE and op in wrapper.COMPILE_UNSUPPORTED:
            continue
        name = "%s %s %s%s %s" % (op, ",".join("%s=%d" % kv for kv in dims.items()), dtype, " " + ranking if ranking else "", policy)
        jobs.append((name, (op, dims, dtype, ranking, a.device, policy), {}))
    if COMPILE:
        for name, cache, expect in COMPILE_ADVERSARIES:
            jobs.append((name, ("add", {"M": 300, "N": 1000}, "bf16", None, "cuda", "strict"), {"cache": cache, "expect": expect}))
    else:
        for op in TEST_OPS:
            jobs.append((op, (op, ADD, "f32", None, a.device, "strict"), {}))

    def job(args, kw):
        if COMPILE and "cache" not in kw:
            kw = dict(kw, cache=compile_cache(*args[:4], args[5], root)[0])
        elif COMPILE and kw["cache"] == "another case's":
            kw = dict(kw, cache=compile_cache("add", ADD, "f32", None, "strict", root)[0])
        return run_visit(*args, closure=closure if a.device == "cuda" else None, **kw)
    with concurrent.futures.ThreadPoolExecutor(a.j) as ex:
        futs = [(name, args, ex.submit(job, args, kw)) for name, args, kw in jobs]
        results = {}
        for name, args, fut in futs:
            try:
                probs, info = fut.result()
            except Exception as e:
                probs, info = ["driver: %s: %s" % (type(e).__name__, e)], {}
            results[name] = info
            if info.get("samples"):
                name += "  (ns of 16 calls: %d, span %d)" % (info["samples"][5][2], info["samples"][5][3])
            if info.get("wall"):
                name += "  %.1f s" % info["wall"]
            report(name, probs)
            if a.v and info.get("stderr", "").strip():
                print("      stderr: " + info["stderr"].strip().replace("\n", "\n      stderr: "))
    shutil.rmtree(root, ignore_errors=True)
    # TF32: the strict product must be far closer to FP64 than the tf32 one.
    if a.device == "cuda" and not COMPILE:
        errs = {}
        dims = {"M": 64, "N": 48, "K": 1024}
        try:
            for policy in ("strict", "tf32"):
                errs[policy] = tf32_error(dims, policy)
        except Exception as e:
            report("tf32 policy", ["%s: %s" % (type(e).__name__, e)])
            return 1
        print("gemm 64x48x1024 f32 error against FP64: strict %.3g, tf32 %.3g" % (errs["strict"], errs["tf32"]))
        report("tf32 policy", [] if errs["strict"] * 8 < errs["tf32"] else ["strict %.3g is not far below tf32 %.3g" % (errs["strict"], errs["tf32"])])
    print("%d failed: %s" % (len(failed), failed) if failed else "all passed")
    return 1 if failed else 0


def tf32_error(dims, policy):
    """A gemm visit's warm set 0 output, as validated, against the FP64
    product of its inputs, relative to the product's largest element."""
    probs, info = run_visit("gemm", dims, "f32", None, "cuda", policy)
    if probs:
        raise RuntimeError("gemm visit (policy %s): %s" % (policy, probs))
    ins = make_inputs("gemm", dims, "f32", 1)  # warm set 0's seed
    exact = ins["A"].double() @ ins["B"].double()
    got = from_bytes(info["warm"]["C", 0], "f32", [dims["M"], dims["N"]]).double()
    return float((got - exact).abs().max()) / float(exact.abs().max())


if __name__ == "__main__":
    sys.exit(main())
