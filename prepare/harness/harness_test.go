package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/tilepipe/tilepipe/internal/visit"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// dim is M = N = K of the test gemm; the harness sees C as 256 elements.
const dim = 16

// compileHarness writes Source (the embedded bytes, not the file on disk)
// to dir and compiles it with every warning an error.
func compileHarness(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler: ", err)
	}
	src := filepath.Join(dir, "harness.c")
	if err := os.WriteFile(src, Source, 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "harness.o")
	cc(t, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-c", src, "-o", obj)
	return obj
}

// linkFault compiles testdata/fault.c with the given FAULT and links it
// with the harness object into an executable in dir.
func linkFault(t *testing.T, dir, harnessObj, fault string) string {
	t.Helper()
	obj := filepath.Join(dir, "fault-"+fault+".o")
	d := fmt.Sprint(dim)
	cc(t, "-std=c11", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
		"-DM="+d, "-DN="+d, "-DK="+d, "-DFAULT="+fault, "-c", filepath.Join("testdata", "fault.c"), "-o", obj)
	exe := filepath.Join(dir, "harness-"+fault)
	cc(t, "-o", exe, harnessObj, obj)
	return exe
}

func cc(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("cc", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// gemmCase is one visit's files: inputs A and B, output C, and VISIT.txt.
type gemmCase struct {
	dir, visit, out string
	a, b            []float32
}

// visitText is a well-formed VISIT.txt for c; tests break it on purpose.
func (c gemmCase) visitText() string {
	n := dim * dim * 4
	return fmt.Sprintf(`tilepipe-visit 2
threads 2
param input A f32 %d %s %d %d
param input B f32 %d %s %d %d
param output C f32 %d %s %d %d
`, n, filepath.Join(c.dir, "A.bin"), dim, dim,
		n, filepath.Join(c.dir, "B.bin"), dim, dim,
		n, c.out, dim, dim)
}

// newGemmCase writes inputs and VISIT.txt under a fresh directory. The
// inputs are small multiples of 1/8 and 1/4, so every product and sum is
// exact and the expected C does not depend on summation order or FMA.
func newGemmCase(t *testing.T) gemmCase {
	t.Helper()
	c := gemmCase{dir: t.TempDir()}
	outDir := filepath.Join(c.dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.out = filepath.Join(outDir, "C.bin")
	c.a = make([]float32, dim*dim)
	c.b = make([]float32, dim*dim)
	for i := range c.a {
		c.a[i] = float32(i*37%17-8) / 8
		c.b[i] = float32(i*53%19-9) / 4
	}
	writeFloats(t, filepath.Join(c.dir, "A.bin"), c.a)
	writeFloats(t, filepath.Join(c.dir, "B.bin"), c.b)
	c.visit = filepath.Join(c.dir, "visit.txt")
	if err := os.WriteFile(c.visit, []byte(c.visitText()), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFloats(t *testing.T, path string, xs []float32) {
	t.Helper()
	if err := os.WriteFile(path, floatBytes(xs), 0o644); err != nil {
		t.Fatal(err)
	}
}

func floatBytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// naiveGemm is C = A·B in float32, k in order; float32() keeps Go from
// fusing the multiply-add.
func naiveGemm(a, b []float32) []float32 {
	c := make([]float32, dim*dim)
	for i := range dim {
		for j := range dim {
			var acc float32
			for k := range dim {
				acc += float32(a[i*dim+k] * b[k*dim+j])
			}
			c[i*dim+j] = acc
		}
	}
	return c
}

// plan: 1 ms warm-up and samples, 3 of each kind.
var plan = visit.Plan{Warmup: time.Millisecond, Sample: time.Millisecond, Samples: 3, Singles: 3, MaxCalls: 1 << 30}

// runVisit runs exe --visit path without a sandbox, driven by
// internal/visit exactly as replay drives it.
func runVisit(t *testing.T, exe, path string) *visit.Run {
	t.Helper()
	spec := visit.Spec{Argv: []string{exe, "--visit", path}, Dir: filepath.Dir(exe), Timeout: 20 * time.Second, Threads: 2}
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) { return s.Drive(plan) })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs exe with args and returns stdout, stderr and the wait error.
func run(t *testing.T, exe string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = filepath.Dir(exe) // a temp dir: somewhere for a core dump to land
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

func checks(guards, poison, inputs, repeat string) map[string]string {
	return map[string]string{"guards": guards, "poison": poison, "inputs": inputs, "repeat": repeat}
}

func TestVisitFaults(t *testing.T) {
	hobj := compileHarness(t, t.TempDir())
	const p, f, n = "pass", "fail", "not_run"
	tests := []struct {
		fault  string
		reason string // "" for status ok
		checks map[string]string
		wrote  bool // the output file exists (step 8 ran)
	}{
		{"none", "", checks(p, p, p, p), true},
		{"offbybound", "", checks(p, p, p, p), true},
		{"halfwrite", "output_not_overwritten: C element 128", checks(p, f, n, n), false},
		{"overrun", "guard_overwritten: C after byte 0", checks(f, n, n, n), false},
		{"underrun", "guard_overwritten: C before byte 4092", checks(f, n, n, n), false},
		{"mutate", "input_mutated: A byte 0", checks(p, p, f, n), false},
		{"nondeterministic", "not_repeatable: C byte 0", checks(p, p, p, f), false},
		{"failrc", "entry_failed: returned 3", checks(n, n, n, n), false},
		{"cached", "output_not_overwritten: C element 0", checks(p, f, n, n), false},
		{"secondfailrc", "entry_failed: returned 4", checks(p, p, p, n), false},
		{"latefailrc", "entry_failed: returned 5 (during timing)", checks(p, p, p, p), true},
		{"lateoverrun", "guard_overwritten: C after byte 0 (after timing)", checks(f, n, n, n), true},
		{"latemutate", "input_mutated: A byte 0 (after timing)", checks(p, p, f, n), true},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			t.Parallel()
			exe := linkFault(t, t.TempDir(), hobj, tt.fault)
			c := newGemmCase(t)
			r := runVisit(t, exe, c.visit)
			if r.Reason != tt.reason {
				t.Errorf("harness(%s) = %q, want %q\nstderr: %s", tt.fault, r.Reason, tt.reason, r.Out.Stderr)
			}
			got := r.Validated.Checks
			if r.Final != nil {
				got = r.Final.Checks
			}
			if !mapsEqual(got, tt.checks) {
				t.Errorf("harness(%s).checks = %v, want %v", tt.fault, got, tt.checks)
			}
			if r.Validated.Threads != 2 || r.Validated.OutputPolicy != "direct" {
				t.Errorf("harness(%s) = threads %d policy %q, want 2 direct", tt.fault, r.Validated.Threads, r.Validated.OutputPolicy)
			}
			if len(r.Out.Stdout) != 0 {
				t.Errorf("harness(%s) stdout = %q, want empty (the timer reports on fd 4)", tt.fault, r.Out.Stdout)
			}
			checkTiming(t, tt.fault, r, r.Final != nil)
			checkOutput(t, tt.fault, c, tt.wrote)
		})
	}
}

// TestVisitDtypes declares C with each storage dtype so that dtype's poison
// pattern is the one checked: halfwrite writes the first 512 of C's 1024
// bytes, so the first element left poisoned is 512/elem.
func TestVisitDtypes(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "halfwrite")
	for _, tc := range []struct {
		dtype string
		dims  string
		want  string
	}{
		{"i64", "16 8", "output_not_overwritten: C element 64"},
		{"f16", "16 32", "output_not_overwritten: C element 256"},
		{"bf16", "32 16", "output_not_overwritten: C element 256"},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			c := newGemmCase(t)
			text := strings.Replace(c.visitText(), "C f32 1024 "+c.out+" 16 16", "C "+tc.dtype+" 1024 "+c.out+" "+tc.dims, 1)
			if err := os.WriteFile(c.visit, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := runVisit(t, exe, c.visit); r.Reason != tc.want {
				t.Errorf("harness(halfwrite, C %s) = %q, want %q", tc.dtype, r.Reason, tc.want)
			}
		})
	}
}

// checkTiming asserts the samples of a visit that reached its final
// report: 3 of each kind, each span holding the timer's own number.
func checkTiming(t *testing.T, fault string, r *visit.Run, timed bool) {
	t.Helper()
	if !timed {
		if len(r.Samples) != 0 {
			t.Errorf("harness(%s) = %d samples, want none", fault, len(r.Samples))
		}
		return
	}
	kinds := map[string]int{}
	for _, s := range r.Samples {
		kinds[s.Kind]++
		if s.SpanNs <= 0 || s.TimerNs < 0 || s.TimerNs > s.SpanNs+int64(visit.ClockAhead) {
			t.Errorf("harness(%s) sample %+v: want 0 <= timer ns <= span", fault, s)
		}
	}
	if kinds[visit.KindBatch] != 3 || kinds[visit.KindSingle] != 3 || kinds[visit.KindEmpty] != 3 {
		t.Errorf("harness(%s) samples = %v, want 3 of each kind", fault, kinds)
	}
	n := r.Calls
	if n < 1 || n > 1<<30 || n&(n-1) != 0 {
		t.Errorf("harness(%s) calls per sample = %d, want a power of 2 in [1, 2^30]", fault, n)
	}
}

// checkOutput asserts that C.bin is the naive result (C[0] + 1 for
// offbybound), written atomically, or absent when no output was written.
func checkOutput(t *testing.T, fault string, c gemmCase, wrote bool) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(c.out))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"C.bin"}
	if !wrote {
		want = nil
	}
	if !slices.Equal(names, want) {
		t.Fatalf("harness(%s) out dir = %v, want %v", fault, names, want)
	}
	if !wrote {
		return
	}
	got, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatal(err)
	}
	expect := naiveGemm(c.a, c.b)
	if fault == "offbybound" {
		expect[0] += 1
	}
	if !bytes.Equal(got, floatBytes(expect)) {
		t.Errorf("harness(%s) C.bin differs from the naive gemm", fault)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func TestVisitCrash(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "crash")
	c := newGemmCase(t)
	if r := runVisit(t, exe, c.visit); r.Reason != "crashed: killed by signal 11 (segmentation fault)" {
		t.Errorf("harness(crash) = %q, want crashed by SIGSEGV", r.Reason)
	}
}

func TestVisitMalformed(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	tests := []struct {
		name string
		edit func(c gemmCase) string // returns the VISIT.txt to use
		want string                  // substring of stderr; "VISIT" stands for the visit path
	}{
		{"old header", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "tilepipe-visit 2", "tilepipe-visit 1", 1)
		}, `VISIT:1: bad header, want "tilepipe-visit 2"`},
		{"unknown key", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\nsamples 3\n", 1)
		}, `VISIT:3: unknown key "samples"`},
		{"duplicate key", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\nthreads 4\n", 1)
		}, `VISIT:3: duplicate key "threads"`},
		{"missing key", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "", 1)
		}, `VISIT: missing key "threads"`},
		{"bad integer", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2", "threads -1", 1)
		}, `VISIT:2: threads: want one integer`},
		{"empty line", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\n\n", 1)
		}, `VISIT:3: empty line`},
		{"bad role", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "param output", "param inout", 1)
		}, `VISIT:5: param: role "inout", want input or output`},
		{"bad dtype", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "A f32", "A f8", 1)
		}, `VISIT:3: param A: dtype "f8", want f32, f16, bf16 or i64`},
		{"bytes not a multiple", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "A f32 1024", "A f32 1022", 1)
		}, `VISIT:3: param A: 1022 bytes is not a multiple of f32's 4`},
		{"dims mismatch", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "B.bin 16 16", "B.bin 16 8", 1)
		}, `VISIT:4: param B: dims give 512 bytes, want 1024`},
		{"no output", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "param output", "param input", 1)
		}, `VISIT: no output param`},
		{"duplicate param", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "param input B", "param input A", 1)
		}, `VISIT:4: param: duplicate name "A"`},
		{"short input file", func(c gemmCase) string {
			a := filepath.Join(c.dir, "A.bin")
			if err := os.WriteFile(a, make([]byte, 1000), 0o644); err != nil {
				t.Fatal(err)
			}
			return c.visitText()
		}, "input A: DIR/A.bin has 1000 bytes, want 1024"},
		{"missing input file", func(c gemmCase) string {
			return strings.Replace(c.visitText(), "B.bin", "nope.bin", 1)
		}, "input B: open DIR/nope.bin: No such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newGemmCase(t)
			if err := os.WriteFile(c.visit, []byte(tt.edit(c)), 0o644); err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer("VISIT", c.visit, "DIR", c.dir).Replace(tt.want)
			r := runVisit(t, exe, c.visit)
			if !strings.HasPrefix(r.Reason, "exited: status 2: harness: error: ") || !strings.Contains(r.Reason, want) {
				t.Errorf("harness --visit (%s) = %q, want exit status 2 naming %q", tt.name, r.Reason, want)
			}
			if len(r.Out.Stdout) != 0 {
				t.Errorf("harness --visit (%s) stdout = %q, want empty", tt.name, r.Out.Stdout)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	for _, args := range [][]string{nil, {"--visit"}, {"--closure", "x"}, {"--time"}} {
		_, stderr, err := run(t, exe, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(stderr), "harness: error: usage:") {
			t.Errorf("harness %q = %v %q, want exit status 2 and a usage message", args, err, stderr)
		}
	}
}

func TestClosure(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	stdout, stderr, err := run(t, exe, "--closure")
	if err != nil {
		t.Fatalf("harness --closure: %v\nstderr: %s", err, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(string(stdout), "\n"), "\n")
	if !slices.IsSorted(lines) || len(slices.Compact(slices.Clone(lines))) != len(lines) {
		t.Errorf("harness --closure = %q, want sorted distinct lines", lines)
	}
	realExe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	var libc bool
	for _, l := range lines {
		if !filepath.IsAbs(l) {
			t.Errorf("harness --closure line %q, want an absolute path", l)
		}
		if fi, err := os.Stat(l); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("harness --closure line %q: not a regular file (%v)", l, err)
		}
		base := filepath.Base(l)
		libc = libc || strings.HasPrefix(base, "libc.so") || strings.HasPrefix(base, "libc-")
	}
	if !slices.Contains(lines, realExe) {
		t.Errorf("harness --closure = %q, want it to list %s", lines, realExe)
	}
	if !libc {
		t.Errorf("harness --closure = %q, want it to list libc", lines)
	}
}
