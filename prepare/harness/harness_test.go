package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/visit"
)

// dim is M = N = K of the test gemm; the harness sees C as 256 elements.
const dim = 16

// compileHarness writes Source (the embedded bytes, not the file on disk)
// to dir and compiles it with every warning an error.
func compileHarness(t testing.TB, dir string) string {
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
func linkFault(t testing.TB, dir, harnessObj, fault string) string {
	t.Helper()
	obj := filepath.Join(dir, "fault-"+fault+".o")
	d := fmt.Sprint(dim)
	cc(t, "-std=c11", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
		"-DM="+d, "-DN="+d, "-DK="+d, "-DFAULT="+fault, "-c", filepath.Join("testdata", "fault.c"), "-o", obj)
	exe := filepath.Join(dir, "harness-"+fault)
	cc(t, "-o", exe, harnessObj, obj)
	return exe
}

func cc(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("cc", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// sets is the warm and fresh sets of every test visit.
const sets = 2

// gemmCase is one visit's memory files and VISIT.txt: inputs A and B and
// output C, each with a warm and a fresh file.
type gemmCase struct {
	dir, visit string
	a, b       [][]float32 // per warm set
	files      []*visit.MemFile
}

// visitText is a well-formed VISIT.txt for c; tests break it on purpose.
func (c gemmCase) visitText() string {
	n := dim * dim * 4
	return fmt.Sprintf(`tilepipe-visit 3
threads 2
pool warm %d 4096
pool fresh %d 64
param input A f32 %d 5 6 %d %d
param input B f32 %d 7 8 %d %d
param output C f32 %d 9 10 %d %d
`, sets, sets, n, dim, dim, n, dim, dim, n, dim, dim)
}

// newGemmCase makes the memory files and VISIT.txt under a fresh
// directory. The inputs are small multiples of 1/8 and 1/4, so every
// product and sum is exact and the expected C does not depend on
// summation order or FMA; each set's differ.
func newGemmCase(t *testing.T) *gemmCase { return newGemmCaseWith(t, false) }

// newGemmCaseWith is newGemmCase; with novel, the fresh inputs are
// novel input files (visit.NewNovelInput) replay can rewrite.
func newGemmCaseWith(t testing.TB, novel bool) *gemmCase {
	t.Helper()
	c := &gemmCase{dir: t.TempDir()}
	for s := range sets {
		a, b := make([]float32, dim*dim), make([]float32, dim*dim)
		for i := range a {
			a[i] = float32((i+s)*37%17-8) / 8
			b[i] = float32((i+3*s)*53%19-9) / 4
		}
		c.a, c.b = append(c.a, a), append(c.b, b)
	}
	n := dim * dim * 4
	for _, in := range []struct {
		name string
		x    [][]float32
	}{{"A", c.a}, {"B", c.b}} {
		var raw [][]byte
		for _, x := range in.x {
			raw = append(raw, floatBytes(x))
		}
		for _, pool := range []string{visit.PoolWarm, visit.PoolFresh} {
			m, err := visit.NewInput(in.name, visit.NewLayout(pool, sets, n), raw)
			if novel && pool == visit.PoolFresh {
				m.Close()
				if m, err = visit.NewNovelInput(in.name, visit.NewLayout(pool, sets, n)); err == nil {
					for s, b := range raw {
						m.Write(s, b)
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			c.files = append(c.files, m)
		}
	}
	for _, pool := range []string{visit.PoolWarm, visit.PoolFresh} {
		m, err := visit.NewOutput("C", visit.NewLayout(pool, sets, n))
		if err != nil {
			t.Fatal(err)
		}
		c.files = append(c.files, m)
	}
	t.Cleanup(func() {
		for _, m := range c.files {
			m.Close()
		}
	})
	c.visit = filepath.Join(c.dir, "visit.txt")
	if err := os.WriteFile(c.visit, []byte(c.visitText()), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *gemmCase) osFiles() []*os.File {
	var fs []*os.File
	for _, m := range c.files {
		fs = append(fs, m.File)
	}
	return fs
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

// runVisit runs exe --visit without a sandbox, driven by internal/visit as
// replay drives its warm samples (Drive); the novel samples that follow
// need a freezer, so TestNovelSamples takes them.
func runVisit(t *testing.T, exe string, c *gemmCase) *visit.Run {
	t.Helper()
	return driveVisit(t, exe, c.visit, c.osFiles(), 2, 20*time.Second)
}

// driveVisit runs exe --visit visitFile with files on fd 5 and up, as
// runVisit says.
func driveVisit(t *testing.T, exe, visitFile string, files []*os.File, threads int, timeout time.Duration) *visit.Run {
	t.Helper()
	spec := visit.Spec{Argv: []string{exe, "--visit", visitFile}, Dir: filepath.Dir(exe), Timeout: timeout, Threads: threads, Files: files}
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
		return s.Drive(plan)
	})
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
		reason string            // "" for status ok
		checks map[string]string // nil: a fault report, no checks
		timed  bool              // the visit reached its final report
	}{
		{"none", "", checks(p, p, p, p), true},
		{"offbybound", "", checks(p, p, p, p), true},
		{"halfwrite", "output_not_overwritten: C set 0 element 128", checks(p, f, n, n), false},
		{"overrun", "guard_overwritten: C warm byte 5120", checks(f, n, n, n), false},
		{"underrun", "guard_overwritten: C warm byte 4092", checks(f, n, n, n), false},
		{"mutate", "input_written: A warm set 0 byte 0", nil, false},
		{"scratch", "input_written: A warm set 0 byte 20", nil, false},
		{"remap", "input_remapped: A warm", checks(p, p, f, n), false},
		{"farwrite", "guard_fault: C warm after, 53249 bytes away", nil, false},
		{"nondeterministic", "not_repeatable: C set 0 byte 0", checks(p, p, p, f), false},
		{"failrc", "entry_failed: returned 3 (set 0)", checks(n, n, n, n), false},
		{"cached", "output_not_overwritten: C set 0 element 0", checks(p, f, n, n), false},
		{"secondfailrc", "entry_failed: returned 4 (set 0)", checks(p, p, p, n), false},
		{"latefailrc", "entry_failed: returned 5 (during timing)", checks(p, p, p, p), true},
		{"lateoverrun", "guard_overwritten: C warm byte 5120 (after timing)", checks(f, n, n, n), true},
		{"latemutate", "input_written: A warm set 0 byte 0", checks(p, p, p, p), false},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			t.Parallel()
			exe := linkFault(t, t.TempDir(), hobj, tt.fault)
			c := newGemmCase(t)
			r := runVisit(t, exe, c)
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
			if tt.checks != nil && (r.Validated.Threads != 2 || r.Validated.OutputPolicy != "direct") {
				t.Errorf("harness(%s) = threads %d policy %q, want 2 direct", tt.fault, r.Validated.Threads, r.Validated.OutputPolicy)
			}
			if len(r.Out.Stdout) != 0 {
				t.Errorf("harness(%s) stdout = %q, want empty (the timer reports on fd 4)", tt.fault, r.Out.Stdout)
			}
			checkTiming(t, tt.fault, r, tt.timed)
			if tt.reason == "" {
				checkOutput(t, tt.fault, c)
			}
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
		{"i64", "16 8", "output_not_overwritten: C set 0 element 64"},
		{"f16", "16 32", "output_not_overwritten: C set 0 element 256"},
		{"bf16", "32 16", "output_not_overwritten: C set 0 element 256"},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			c := newGemmCase(t)
			text := strings.Replace(c.visitText(), "C f32 1024 9 10 16 16", "C "+tc.dtype+" 1024 9 10 "+tc.dims, 1)
			if err := os.WriteFile(c.visit, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := runVisit(t, exe, c); r.Reason != tc.want {
				t.Errorf("harness(halfwrite, C %s) = %q, want %q", tc.dtype, r.Reason, tc.want)
			}
		})
	}
}

// checkTiming asserts the samples of a visit that reached its final
// report: 3 of each kind Drive takes, each span holding the timer's own
// number.
func checkTiming(t *testing.T, fault string, r *visit.Run, timed bool) {
	t.Helper()
	if !timed {
		if r.Final != nil {
			t.Errorf("harness(%s) reached its final report, want it to stop before", fault)
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
	if want := map[string]int{samples.KindBatch: 3, samples.KindSingle: 3, samples.KindEmpty: 3}; !maps.Equal(kinds, want) {
		t.Errorf("harness(%s) samples = %v, want %v", fault, kinds, want)
	}
	n := r.Calls
	if n < 1 || n > 1<<30 || n&(n-1) != 0 {
		t.Errorf("harness(%s) calls per sample = %d, want a power of 2 in [1, 2^30]", fault, n)
	}
	if r.Validated.ColdNs <= 0 {
		t.Errorf("harness(%s) cold_ns = %d, want the first call's time", fault, r.Validated.ColdNs)
	}
}

// checkOutput asserts that every warm set of C holds the naive result of
// its inputs (C[0] + 1 for offbybound), that every fresh set of C is as
// replay made it (only a novel sample calls the fresh sets, and a visit
// of Drive alone takes none), and that every canary is whole.
func checkOutput(t *testing.T, fault string, c *gemmCase) {
	t.Helper()
	for _, m := range c.files[4:] {
		if err := m.CheckCanary(); err != nil {
			t.Errorf("harness(%s): %v", fault, err)
		}
		if m.Layout.Pool == visit.PoolFresh {
			made, err := visit.NewOutput(m.Name, m.Layout)
			if err != nil {
				t.Fatal(err)
			}
			for s := range sets {
				if !bytes.Equal(m.Set(s), made.Set(s)) {
					t.Errorf("harness(%s) C fresh set %d was written, want it as replay made it (no novel sample called it)", fault, s)
				}
			}
			made.Close()
			continue
		}
		for s := range sets {
			expect := naiveGemm(c.a[s], c.b[s])
			if fault == "offbybound" {
				expect[0] += 1
			}
			if !bytes.Equal(m.Set(s), floatBytes(expect)) {
				t.Errorf("harness(%s) C %s set %d differs from the naive gemm", fault, m.Layout.Pool, s)
			}
		}
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
	if r := runVisit(t, exe, c); r.Reason != "crashed: killed by signal 11 (segmentation fault)" {
		t.Errorf("harness(crash) = %q, want crashed by SIGSEGV", r.Reason)
	}
}

func TestVisitMalformed(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	tests := []struct {
		name string
		edit func(c *gemmCase) string // returns the VISIT.txt to use
		want string                   // substring of stderr; "VISIT" stands for the visit path
	}{
		{"old header", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "tilepipe-visit 3", "tilepipe-visit 2", 1)
		}, `VISIT:1: bad header, want "tilepipe-visit 3"`},
		{"unknown key", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\nsamples 3\n", 1)
		}, `VISIT:3: unknown key "samples"`},
		{"l2 on the CPU", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\nl2 flush\n", 1)
		}, `VISIT:3: unknown key "l2"`},
		{"graph on the CPU", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\ngraph 32\n", 1)
		}, `VISIT:3: unknown key "graph"`},
		{"duplicate key", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\nthreads 4\n", 1)
		}, `VISIT:3: duplicate key "threads"`},
		{"missing key", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "", 1)
		}, `VISIT: missing key "threads"`},
		{"bad integer", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2", "threads -1", 1)
		}, `VISIT:2: threads: want one integer`},
		{"empty line", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "threads 2\n", "threads 2\n\n", 1)
		}, `VISIT:3: empty line`},
		{"one warm set", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "pool warm 2", "pool warm 1", 1)
		}, `VISIT:3: pool warm: sets "1", want an integer in [2, 1048576]`},
		{"pools swapped", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "pool warm 2 4096\npool fresh 2 64", "pool fresh 2 64\npool warm 2 4096", 1)
		}, `VISIT:3: pool: want "pool warm SETS GAP"`},
		{"gap not aligned", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "pool fresh 2 64", "pool fresh 2 60", 1)
		}, `VISIT:4: pool fresh: gap "60", want a positive multiple of 64`},
		{"no pools", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "pool warm 2 4096\npool fresh 2 64\n", "", 1)
		}, `VISIT:3: param before the warm and fresh pools`},
		{"bad role", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "param output", "param inout", 1)
		}, `VISIT:7: param: role "inout", want input or output`},
		{"bad dtype", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "A f32", "A f8", 1)
		}, `VISIT:5: param A: dtype "f8", want f32, f16, bf16 or i64`},
		{"bytes not a multiple", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "A f32 1024", "A f32 1022", 1)
		}, `VISIT:5: param A: 1022 bytes is not a multiple of f32's 4`},
		{"dims mismatch", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "7 8 16 16", "7 8 16 8", 1)
		}, `VISIT:6: param B: dims give 512 bytes, want 1024`},
		{"no output", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "param output", "param input", 1)
		}, `VISIT: no output param`},
		{"duplicate param", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "param input B", "param input A", 1)
		}, `VISIT:6: param: duplicate name "A"`},
		{"fd of the pipes", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "A f32 1024 5 6", "A f32 1024 4 6", 1)
		}, `VISIT:5: param A: bad warm fd "4", want a descriptor above 4`},
		{"fd twice", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "B f32 1024 7 8", "B f32 1024 7 6", 1)
		}, `VISIT:6: param B: fd 6 is also A's`},
		{"not open", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "B f32 1024 7 8", "B f32 1024 7 30", 1)
		}, "param B fresh file: fd 30: Bad file descriptor"},
		{"wrong size", func(c *gemmCase) string {
			return strings.Replace(c.visitText(), "f32 1024 5 6 16 16", "f32 4096 5 6 32 32", 1)
		}, "param A warm file: fd 5 has 16384 bytes, want a memory file of 20480"},
		{"input not sealed", func(c *gemmCase) string {
			// C's warm file is writable: hand it over as A's.
			return strings.Replace(strings.Replace(c.visitText(), "A f32 1024 5 6", "A f32 1024 9 6", 1), "C f32 1024 9 10", "C f32 1024 5 10", 1)
		}, "param A warm file: fd 9 is not sealed against writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newGemmCase(t)
			if err := os.WriteFile(c.visit, []byte(tt.edit(c)), 0o644); err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer("VISIT", c.visit, "DIR", c.dir).Replace(tt.want)
			r := runVisit(t, exe, c)
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

// TestFreshRefused: visit protocol 3's "fresh SEQ N" is no longer a
// command of the timer (protocol 4's novel samples took its place,
// TestNovelSamples), so replay's commands are all a visit can run: the
// visit ends with a usage error after its validated report, having sent
// no sample.
func TestFreshRefused(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	c := newGemmCase(t)
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "--visit", c.visit)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	cmd.ExtraFiles = append([]*os.File{cmdR, repW}, c.osFiles()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	repW.Close()
	_, werr := cmdW.WriteString("fresh 1 1\n")
	cmdW.Close()
	reports, rerr := io.ReadAll(repR)
	repR.Close()
	err = cmd.Wait()
	if werr != nil || rerr != nil {
		t.Fatalf("write the command: %v; read the reports: %v", werr, rerr)
	}
	want := `harness: error: command "fresh 1 1": want "run SEQ N", "novel SEQ N", "graph SEQ R" (GPU) or "end"` + "\n"
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("harness given \"fresh 1 1\" = %v, stderr %q, stdout %q; want exit status 2, stderr %q", err, stderr.String(), stdout.String(), want)
	}
	lines := strings.Split(strings.TrimSuffix(string(reports), "\n"), "\n")
	if rep, err := visit.ParseReport([]byte(lines[0])); len(lines) != 1 || err != nil || rep.Type != visit.TypeValidated || rep.Status != "ok" {
		t.Errorf("harness given \"fresh 1 1\": reports %q, want the validated report alone", reports)
	}
}

// TestNovelSamples: a novel sample's calls compute on the inputs replay
// wrote into the fresh sets while the visit was frozen, each call into
// the output replay poisoned for it; "novel SEQ 0" is the empty sample,
// and more calls than fresh sets is a usage error.
func TestNovelSamples(t *testing.T) {
	l, err := visit.ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here (%v)", err)
	}
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	c := newGemmCaseWith(t, true)
	// c.files: A warm, A fresh, B warm, B fresh, C warm, C fresh.
	aFresh, bFresh, cFresh := c.files[1], c.files[3], c.files[5]
	spec := visit.Spec{Argv: []string{exe, "--visit", c.visit}, Dir: dir, Timeout: 20 * time.Second, Threads: 2, Files: c.osFiles(), Limiter: l}
	poison := visit.FillPattern("f32", 12345)
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
		if _, _, err := s.Novel(1); err == nil || !strings.Contains(err.Error(), "not frozen") {
			t.Errorf("a novel sample of a running visit = %v, want refused", err)
		}
		if err := s.Freeze(); err != nil {
			return nil, 0, err
		}
		for k := range 3 {
			want := writeNovelGemm(aFresh, bFresh, k)
			cFresh.Fill(poison)
			if _, _, err := s.Novel(sets); err != nil {
				return nil, 0, err
			}
			for set := range sets {
				if got := cFresh.Set(set); !bytes.Equal(got, floatBytes(want[set])) {
					t.Errorf("novel sample %d set %d: C differs from A·B of the inputs written before it", k, set)
				}
			}
		}
		if _, _, err := s.Novel(0); err != nil {
			return nil, 0, err
		}
		_, _, err := s.Novel(sets + 1)
		return nil, 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`exited: status 2: harness: error: command "novel 5 %d": want 0 to %d novel calls (the fresh sets)`, sets+1, sets)
	if !strings.HasPrefix(r.Reason, want) {
		t.Errorf("a novel sample of more calls than fresh sets = %q, want %q", r.Reason, want)
	}
}

// writeNovelGemm writes novel sample k's inputs into every fresh set of
// aFresh and bFresh, as replay writes them while the visit is frozen, and
// returns each set's A·B.
func writeNovelGemm(aFresh, bFresh *visit.MemFile, k int) [][]float32 {
	var want [][]float32
	for set := range sets {
		a, b := make([]float32, dim*dim), make([]float32, dim*dim)
		for i := range a {
			a[i] = float32((i*7+set+5*k)%23-11) / 8
			b[i] = float32((i*3+2*set+k)%13-6) / 4
		}
		aFresh.Write(set, floatBytes(a))
		bFresh.Write(set, floatBytes(b))
		want = append(want, naiveGemm(a, b))
	}
	return want
}

// TestWarmInputSealedForGood: only a fresh input may be sealed against
// future writes alone; a warm input replay could still write (through a
// mapping it kept) is refused before any call.
func TestWarmInputSealedForGood(t *testing.T) {
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	c := newGemmCase(t)
	m, err := visit.NewNovelInput("A", visit.NewLayout(visit.PoolWarm, sets, dim*dim*4))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	files := c.osFiles()
	files[0] = m.File // A's warm file
	spec := visit.Spec{Argv: []string{exe, "--visit", c.visit}, Dir: dir, Timeout: 20 * time.Second, Threads: 2, Files: files}
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
		return nil, 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "exited: status 2: harness: error: param A warm file: fd 5 is not sealed against writes"; !strings.HasPrefix(r.Reason, want) {
		t.Errorf("a warm input sealed against future writes only = %q, want %q", r.Reason, want)
	}
}

// BenchmarkNovelBracket is what a novel sample costs beyond its calls:
// `novel SEQ 0` through Session.Novel (clock, thaw, command, answer,
// freeze until frozen, clock), beside `run SEQ 0` (the channel alone);
// ns/op is one bracket. Without a freezer it is skipped.
func BenchmarkNovelBracket(b *testing.B) {
	l, err := visit.ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		b.Skipf("no freezer here (%v)", err)
	}
	dir := b.TempDir()
	exe := linkFault(b, dir, compileHarness(b, dir), "none")
	c := newGemmCaseWith(b, true)
	for _, novel := range []bool{false, true} {
		name := "run0"
		if novel {
			name = "novel0"
		}
		b.Run(name, func(b *testing.B) {
			spec := visit.Spec{Argv: []string{exe, "--visit", c.visit}, Dir: dir, Timeout: time.Minute, Threads: 1, Files: c.osFiles(), Limiter: l}
			_, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
				if novel {
					if err := s.Freeze(); err != nil {
						return nil, 0, err
					}
				}
				b.ResetTimer()
				for range b.N {
					take := s.Sample
					if novel {
						take = s.Novel
					}
					if _, _, err := take(0); err != nil {
						return nil, 0, err
					}
				}
				b.StopTimer()
				return nil, 0, nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
