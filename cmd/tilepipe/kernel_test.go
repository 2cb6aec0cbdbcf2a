package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// kernelFile writes a kernel file named name with body into a new
// directory and returns its path.
func kernelFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const add64 = `{"op": "add", "dims": {"M": 4, "N": 64}, "seed": 5}`

// addKernel is a correct C add kernel; extra goes before the function.
func addKernel(directives, extra string) string {
	return directives + `
#include "tilepipe_case.h"
` + extra + `
int tilepipe_kernel(void *const *args)
{
	const float *a = args[TP_ARG_A], *b = args[TP_ARG_B];
	float *c = args[TP_ARG_C];
	for (int i = 0; i < TP_M * TP_N; i++)
		c[i] = a[i] + b[i];
	return 0;
}
`
}

// kernelCapture captures cohort with --kernel mine=c:FILE alone.
func kernelCapture(t *testing.T, cohort, kernel string) (string, int, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	code, _, errs := tp(t, "capture", "--cohort", cohort, "--routes", "", "--kernel", "mine=c:"+kernel, "--jobs", "1", "--output", dir)
	return dir, code, errs
}

func mineBuild(t *testing.T, dir string) artifacts.Build {
	t.Helper()
	doc := readCapture(t, dir)
	b := doc.Cases[0].Builds
	i := slices.IndexFunc(b, func(b artifacts.Build) bool { return b.Route == "mine" })
	if i < 0 {
		t.Fatalf("capture %s has no build of route mine", dir)
	}
	return b[i]
}

// TestKernelFileRefused: what a careful user gets wrong about --kernel is
// refused before anything is written, with the flag, the file and what
// docs/kernels.md expects.
func TestKernelFileRefused(t *testing.T) {
	needRoutes(t, "kernel-c")
	good := kernelFile(t, "add.c", addKernel("// tilepipe-ops: add", ""))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no kind", []string{"--kernel", "mine=" + good}, `--kernel "mine=` + good + `": want NAME=KIND:FILE, e.g. mine=c:kernels/add.c (docs/kernels.md)`},
		{"unknown kind", []string{"--kernel", "mine=fortran:" + good}, `kind "fortran": want one of c, torch (docs/kernels.md)`},
		{"bad name", []string{"--kernel", "my kernel=c:" + good}, `NAME "my kernel": want letters, digits`},
		{"missing file", []string{"--kernel", "mine=c:/nonexistent/k.c"}, "--kernel mine: lstat /nonexistent: no such file or directory"},
		{"not a .c file", []string{"--kernel", "mine=c:" + kernelFile(t, "add.cpp", "")}, `--kernel mine: file name "add.cpp": want letters, digits, '.', '_' or '-' ending in .c (and not wrapper.py), the name the route builds it by`},
		{"the wrapper's name", []string{"--kernel", "mine=torch:" + kernelFile(t, "wrapper.py", "")}, `--kernel mine: file name "wrapper.py": want`},
		{"a space in the name", []string{"--kernel", "mine=c:" + kernelFile(t, "my add.c", "")}, `--kernel mine: file name "my add.c": want`},
		{"kernel route by name", []string{"--routes", "kernel-c"}, `route "kernel-c": builds a user's kernel file: give it as --kernel NAME=c:FILE (docs/kernels.md)`},
		{"no ops line", []string{"--kernel", "mine=c:" + kernelFile(t, "k.c", addKernel("", ""))}, "k.c: no 'tilepipe-ops:' line: name the ops the file implements, e.g. '// tilepipe-ops: add' (docs/kernels.md)"},
		{"two ops lines", []string{"--kernel", "mine=c:" + kernelFile(t, "k.c", addKernel("// tilepipe-ops: add\n// tilepipe-ops: gemm", ""))}, "k.c:2: a second tilepipe-ops line (give them all on one)"},
		{"bad dtype", []string{"--kernel", "mine=c:" + kernelFile(t, "k.c", addKernel("// tilepipe-ops: add\n// tilepipe-dtypes: f64", ""))}, "k.c:2: tilepipe-dtypes: f64: want f32, f16, bf16"},
		{"named twice", []string{"--routes", "halide", "--kernel", "halide=c:" + good}, "route halide named twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "capture")
			args := append([]string{"capture", "--cohort", tinyCohort(t, add64), "--routes", ""}, tc.args...)
			code, _, errs := tp(t, append(args, "--output", dir)...)
			if code == exitOK || !strings.Contains(errs, tc.want) {
				t.Errorf("capture %v = exit %d, want a refusal with %q:\n%s", tc.args, code, tc.want, errs)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("a refused capture left %s behind (%v)", dir, err)
			}
		})
	}
}

// TestKernelFileBuilds: a kernel file that does not compile, or defines
// no entry, is a failed row whose reason points at the file and line (the
// route's own reason: its row says which route); an
// op or dtype the file does not declare is unsupported; flags that turn
// on instructions are the build's requires_cpu.
func TestKernelFileBuilds(t *testing.T) {
	needRoutes(t, "kernel-c")
	for _, tc := range []struct {
		name, file, body, status, reason string
		requires                         []string
	}{
		{"syntax error", "bad.c", addKernel("// tilepipe-ops: add", "static int x = 1\n"), artifacts.StatusFailed,
			"compiling bad.c failed (exit 1): bad.c:5:", nil},
		{"no entry", "noentry.c", "// tilepipe-ops: add\nint other(void *const *a) { return 0; }\n", artifacts.StatusFailed,
			"noentry.c defines no function tilepipe_kernel: want int tilepipe_kernel(void *const *args) (docs/kernels.md)", nil},
		{"other op", "gemm.c", addKernel("// tilepipe-ops: gemm", ""), artifacts.StatusUnsupported,
			"gemm.c implements gemm, not add (its tilepipe-ops line)", nil},
		{"other dtype", "half.c", addKernel("// tilepipe-ops: add\n// tilepipe-dtypes: bf16", ""), artifacts.StatusUnsupported,
			"half.c takes bf16 storage, not f32 (its tilepipe-dtypes line)", nil},
		{"plain", "add.c", addKernel("// tilepipe-ops: add", ""), artifacts.StatusBuilt, "", nil},
		{"avx2", "avx.c", addKernel("// tilepipe-ops: add\n// tilepipe-cflags: -O3 -mavx2 -mfma", ""), artifacts.StatusBuilt, "", []string{"avx2", "fma"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, errs := kernelCapture(t, tinyCohort(t, add64), kernelFile(t, tc.file, tc.body))
			b := mineBuild(t, dir)
			if b.Status != tc.status || !strings.HasPrefix(b.Reason, tc.reason) {
				t.Fatalf("build = %s %q, want %s %q\n%s", b.Status, b.Reason, tc.status, tc.reason, errs)
			}
			if strings.HasPrefix(tc.reason, "compiling") && !strings.Contains(b.Reason, "error") {
				t.Errorf("reason %q names no compiler error", b.Reason)
			}
			// What -mavx2 adds beyond the compiler's own baseline depends on
			// that baseline (x86-64 or x86-64-v2): at least avx2 and fma.
			for _, f := range tc.requires {
				if !slices.Contains(b.RequiresCPU, f) {
					t.Errorf("requires_cpu %v, want it to hold %s", b.RequiresCPU, f)
				}
			}
			if tc.requires == nil && len(b.RequiresCPU) > 0 {
				t.Errorf("requires_cpu %v for a file built with the compiler's baseline, want none", b.RequiresCPU)
			}
		})
	}
}

// TestKernelFilePolicy: a user's kernel file meets every check an object
// build meets; one that defines clock_gettime, to answer the timer's own
// clock, is refused at prepare by the link policy.
func TestKernelFilePolicy(t *testing.T) {
	needRoutes(t, "kernel-c")
	clock := addKernel("// tilepipe-ops: add", "#include <time.h>\nint clock_gettime(clockid_t id, struct timespec *ts) { ts->tv_sec = 0; ts->tv_nsec = 1; return 0; }\n")
	dir, code, errs := kernelCapture(t, tinyCohort(t, add64), kernelFile(t, "clock.c", clock))
	if code != exitOK {
		t.Fatalf("capture = exit %d: %s", code, errs)
	}
	prep := filepath.Join(t.TempDir(), "prepared")
	code, _, errs = tp(t, "prepare", "--capture", dir, "--output", prep)
	e := readPrepared(t, prep).Entries[0]
	want := "link_policy: clock.o defines clock_gettime, which the timer or the C library provides"
	if code != exitFailure || e.Status != artifacts.StatusFailed || e.Reason != want {
		t.Errorf("prepare = exit %d, entry %s %q; want exit 1 and failed %q\n%s", code, e.Status, e.Reason, want, errs)
	}
}

// TestKernelFileForged: the claim for a kernel route is a claim for the
// file the checkpoint names. A forger who timed one file and names
// another (the stored kernel file swapped for other bytes, its record
// re-hashed), or drops the record, is caught by the audit's routes check.
func TestKernelFileForged(t *testing.T) {
	long(t)
	needRoutes(t, "kernel-c")
	dir := filepath.Join(t.TempDir(), "run")
	add := kernelFile(t, "add.c", addKernel("// tilepipe-ops: add", ""))
	args := append([]string{"run", "--cohort", tinyCohort(t, add64), "--routes", "", "--kernel", "mine=c:" + add, "--baseline", "mine", "--rounds", "2", "--output", dir}, fast...)
	if code, _, errs := tp(t, args...); code != exitOK {
		t.Fatalf("run = exit %d: %s", code, errs)
	}
	if code, got := auditRun(t, dir, filepath.Join(dir, "replay")); code != exitOK || !strings.Contains(got, "every kernel file route's builds are of its stored file") {
		t.Fatalf("audit of the honest run = exit %d, want 0 and the routes check passed:\n%s", code, got)
	}
	const title = "external/kernels/mine/add.c"
	var built artifacts.Digest
	for _, tc := range []struct {
		name   string
		mutate func(st *artifacts.Stage, r *artifacts.Route)
		want   func() string
	}{
		{"file swapped", func(st *artifacts.Stage, r *artifacts.Route) {
			built = r.Kernel.Digest
			r.Kernel.Digest = relayer(t, st, title, func(b []byte) []byte { return append(b, "/* the file a reviewer reads */\n"...) })
		}, func() string {
			return "build add-4x64/mine: source add.c is " + string(built) + ", the kernel file (" + title + ") is "
		}},
		{"record dropped", func(_ *artifacts.Stage, r *artifacts.Route) { r.Kernel = nil }, func() string {
			return "route mine: runs kernel-c, which builds a user's kernel file, and records no kernel"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged := filepath.Join(t.TempDir(), "run")
			if out, err := exec.Command("cp", "-a", dir, forged).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			forgeStage(t, filepath.Join(forged, "capture"), artifacts.CaptureType, nil, func(st *artifacts.Stage, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				tc.mutate(st, &d.Routes[0])
			})
			code, got := auditRun(t, forged, filepath.Join(forged, "replay"))
			if want := tc.want(); code != exitFailure || !strings.Contains(got, "FAILED routes") || !strings.Contains(got, want) {
				t.Errorf("audit = exit %d, want 1, the routes check failed and %q:\n%s", code, want, got)
			}
		})
	}
}

// TestKernelFileTorch: a PyTorch kernel file (the torch kind) runs the
// whole chain as torch-eager's visits do and audits; one computing the
// wrong thing fails the oracle; one that does not parse, or defines no
// kernel, fails its build by file and line; one whose import raises fails
// its visits with the reason; one that patches the wrapper's clock (it runs
// in the wrapper's interpreter) to report a quarter of its time fails the
// clock cross-check.
func TestKernelFileTorch(t *testing.T) {
	long(t)
	needRoutes(t, "kernel-torch", "torch-eager")
	body := func(expr string) string {
		return "# tilepipe-ops: add\nimport torch\n\ndef kernel(A, B, C):\n    " + expr + "\n"
	}
	for _, tc := range []struct {
		name, file, body string
		build, visit     string // want: the build's status and reason prefix, then the first visit's
	}{
		{"honest", "add_torch.py", body("torch.add(A, B, out=C)"), "built", "passed"},
		{"wrong", "sub.py", body("torch.sub(A, B, out=C)"), "built", "failed oracle: warm set 0: bound: C["},
		{"syntax", "bad.py", "# tilepipe-ops: add\ndef kernel(A, B, C)\n    pass\n", "failed bad.py:2: expected ':'", ""},
		{"no kernel", "nok.py", "# tilepipe-ops: add\ndef other(A, B, C):\n    pass\n", "failed nok.py defines no top-level function kernel", ""},
		{"patches the timer's clock", "liar.py", "# tilepipe-ops: add\nimport time, torch\n_real = time.perf_counter_ns\n_t0 = _real()\n" +
			"time.perf_counter_ns = lambda: _t0 + (_real() - _t0) // 4\n\ndef kernel(A, B, C):\n    torch.add(A, B, out=C)\n", "built", "failed clock_mismatch: "},
		{"import raises", "raises.py", "# tilepipe-ops: add\nraise RuntimeError('no GPU here')\ndef kernel(A, B, C):\n    pass\n", "built",
			"failed kernel file raises.py: importing it raised RuntimeError: no GPU here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			args := append([]string{"run", "--cohort", tinyCohort(t, add64), "--routes", "", "--kernel", "mine=torch:" + kernelFile(t, tc.file, tc.body),
				"--baseline", "mine", "--rounds", "1", "--output", dir}, fast...)
			if tc.name == "patches the timer's clock" {
				// On the CPU the timer's number never enters a result
				// (replay's span is the time); the cross-check bites where
				// the lie exceeds 5 ms + a quarter of the span: 20 ms
				// samples, three quarters of them hidden.
				args = append(args, "--sample-ms", "20")
			}
			code, out, errs := tp(t, args...)
			b := mineBuild(t, filepath.Join(dir, "capture"))
			if got := b.Status + " " + b.Reason; !strings.HasPrefix(got, tc.build) {
				t.Fatalf("build = %q, want %q\n%s", got, tc.build, errs)
			}
			if tc.visit == "" {
				return
			}
			v := readReplay(t, filepath.Join(dir, "replay")).Visits[0]
			if got := v.Status + " " + v.Reason; !strings.HasPrefix(got, tc.visit) {
				t.Errorf("visit = %q, want %q\n%s", got, tc.visit, errs)
			}
			if tc.name == "honest" && (code != exitOK || !strings.Contains(out, "audit verdict: PASS")) {
				t.Errorf("run = exit %d, want 0 and the audit passed\n%s", code, errs)
			}
		})
	}
}
