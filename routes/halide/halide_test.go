package halide_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// route and driverObj are built once by TestMain: the route with its own
// Makefile, the driver (testdata/driver.c, a stand-in for the timer) with cc.
var (
	route     string
	driverObj string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "halide-route-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("make", "-j2", "BIN="+bin).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "make BIN=%s: %v\n%s", bin, err, out)
		return 1
	}
	route = filepath.Join(bin, "route")
	driverObj = filepath.Join(dir, "driver.o")
	if out, err := exec.Command("cc", "-O1", "-Wall", "-c", "testdata/driver.c", "-o", driverObj).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cc testdata/driver.c: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

type param struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
}

func (p param) elems() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

type caseFile struct {
	ID        string             `json:"id"`
	Op        string             `json:"op"`
	Dims      map[string]int     `json:"dims"`
	Dtype     string             `json:"dtype"`
	Pattern   string             `json:"pattern"`
	Seed      uint64             `json:"seed"`
	Policy    string             `json:"policy"`
	Params    map[string]float64 `json:"params,omitempty"`
	Signature []param            `json:"signature"`
	Threads   int                `json:"threads"`
}

type file struct {
	Path string `json:"path"`
	Role string `json:"role"`
}

type response struct {
	Protocol int    `json:"protocol"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Kind     string `json:"kind"`
	Files    []file `json:"files"`
	Entry    *struct {
		Symbol string  `json:"symbol"`
		Params []param `json:"params"`
	} `json:"entry"`
	Link      []string        `json:"link"`
	Process   json.RawMessage `json:"process"`
	Schedule  map[string]any  `json:"schedule"`
	Toolchain map[string]any  `json:"toolchain"`
	Commands  []command       `json:"commands"`
}

type command struct {
	Argv []string `json:"argv"`
	Exit int      `json:"exit"`
}

// signature mirrors the op table of docs/protocol.md.
func signature(op string, d map[string]int) []param {
	M, N, K := d["M"], d["N"], d["K"]
	in := func(name string, shape ...int) param { return param{name, "input", "f32", shape} }
	out := func(name string, shape ...int) param { return param{name, "output", "f32", shape} }
	switch op {
	case "gemm":
		return []param{in("A", M, K), in("B", K, N), out("C", M, N)}
	case "add":
		return []param{in("A", M, N), in("B", M, N), out("C", M, N)}
	case "sum":
		return []param{in("X", M, N), out("Y", M)}
	case "softmax":
		return []param{in("X", M, N), out("Y", M, N)}
	case "rmsnorm":
		return []param{in("X", M, N), in("W", N), out("Y", M, N)}
	case "layernorm":
		return []param{in("X", M, N), in("W", N), in("B", N), out("Y", M, N)}
	}
	return nil
}

func newCase(op string, dims map[string]int, eps float64) caseFile {
	c := caseFile{
		Op: op, Dims: dims, Dtype: "f32", Pattern: "normal", Seed: 1, Policy: "strict",
		Signature: signature(op, dims), Threads: 2,
	}
	if eps != 0 {
		c.Params = map[string]float64{"eps": eps}
	}
	var parts []string
	for _, k := range []string{"M", "N", "K"} {
		if v, ok := dims[k]; ok {
			parts = append(parts, fmt.Sprint(v))
		}
	}
	c.ID = op + "-" + strings.Join(parts, "x")
	return c
}

// build runs `route build` on c in a fresh workdir; the route must exit 0
// and print exactly one JSON object.
func build(t *testing.T, c any) (resp response, workdir string) {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	casePath := filepath.Join(dir, "case.json")
	if err := os.WriteFile(casePath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	workdir = filepath.Join(dir, "work")
	if err := os.Mkdir(workdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(route, "build", "--case", casePath, "--workdir", workdir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("route build %s: %v\nstderr:\n%s", casePath, err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("route build: response: %v\nstdout:\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Fatalf("route build: stdout holds more than one JSON document:\n%s", stdout.String())
	}
	return resp, workdir
}

// rng is xorshift64*, so inputs are the same on every run.
type rng uint64

func (r *rng) float() float64 {
	*r ^= *r >> 12
	*r ^= *r << 25
	*r ^= *r >> 27
	v := uint64(*r) * 2685821657736338717
	return float64(v>>11)/float64(1<<53)*2 - 1 // [-1, 1)
}

// inputs fills each input param with scale*u+offset, u uniform in [-1, 1),
// rounded to float32.
func inputs(sig []param, seed uint64, scale, offset float64) [][]float32 {
	r := rng(seed*0x9E3779B97F4A7C15 + 1)
	var out [][]float32
	for _, p := range sig {
		if p.Role != "input" {
			continue
		}
		v := make([]float32, p.elems())
		for i := range v {
			v[i] = float32(scale*r.float() + offset)
		}
		out = append(out, v)
	}
	return out
}

// reference computes each output in float64 together with a magnitude
// for the tolerance: the sum of absolute terms that produced it.
func reference(op string, d map[string]int, eps float64, in [][]float32) (want, mag []float64) {
	M, N, K := d["M"], d["N"], d["K"]
	f := func(x float32) float64 { return float64(x) }
	switch op {
	case "gemm":
		A, B := in[0], in[1]
		want, mag = make([]float64, M*N), make([]float64, M*N)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				var s, m float64
				for k := 0; k < K; k++ {
					t := f(A[i*K+k]) * f(B[k*N+j])
					s += t
					m += math.Abs(t)
				}
				want[i*N+j], mag[i*N+j] = s, m
			}
		}
	case "add":
		want, mag = make([]float64, M*N), make([]float64, M*N)
		for i := range want {
			want[i] = f(in[0][i]) + f(in[1][i])
			mag[i] = math.Abs(f(in[0][i])) + math.Abs(f(in[1][i]))
		}
	case "sum":
		want, mag = make([]float64, M), make([]float64, M)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				want[i] += f(in[0][i*N+j])
				mag[i] += math.Abs(f(in[0][i*N+j]))
			}
		}
	case "softmax":
		X := in[0]
		want, mag = make([]float64, M*N), make([]float64, M*N)
		for i := 0; i < M; i++ {
			mx := math.Inf(-1)
			for j := 0; j < N; j++ {
				mx = math.Max(mx, f(X[i*N+j]))
			}
			var s float64
			for j := 0; j < N; j++ {
				s += math.Exp(f(X[i*N+j]) - mx)
			}
			for j := 0; j < N; j++ {
				want[i*N+j] = math.Exp(f(X[i*N+j])-mx) / s
				mag[i*N+j] = want[i*N+j]
			}
		}
	case "rmsnorm", "layernorm":
		X, W := in[0], in[1]
		want, mag = make([]float64, M*N), make([]float64, M*N)
		for i := 0; i < M; i++ {
			var mean, ss float64
			if op == "layernorm" {
				for j := 0; j < N; j++ {
					mean += f(X[i*N+j])
				}
				mean /= float64(N)
			}
			for j := 0; j < N; j++ {
				dv := f(X[i*N+j]) - mean
				ss += dv * dv
			}
			r := 1 / math.Sqrt(ss/float64(N)+eps)
			for j := 0; j < N; j++ {
				y := (f(X[i*N+j]) - mean) * r * f(W[j])
				mag[i*N+j] = math.Abs(y)
				if op == "layernorm" {
					y += f(in[2][j])
					mag[i*N+j] += math.Abs(f(in[2][j]))
				}
				want[i*N+j] = y
			}
		}
	}
	return want, mag
}

// run links the case's objects with the driver, runs it on in and returns
// the outputs; the driver fails on any guard, poison, input or repeat check.
func run(t *testing.T, resp response, workdir string, sig []param, in [][]float32) [][]float32 {
	t.Helper()
	exe := filepath.Join(workdir, "driver")
	argv := []string{"-o", exe, driverObj}
	for _, f := range resp.Files {
		if f.Role == "object" {
			argv = append(argv, filepath.Join(workdir, f.Path))
		}
	}
	argv = append(argv, resp.Link...)
	if out, err := exec.Command("cc", argv...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	var args []string
	var outPaths []string
	k := 0
	for i, p := range sig {
		path := filepath.Join(workdir, fmt.Sprintf("p%d.bin", i))
		if p.Role == "input" {
			if err := os.WriteFile(path, f32bytes(in[k]), 0o644); err != nil {
				t.Fatal(err)
			}
			k++
			args = append(args, fmt.Sprintf("in:%d:%s", p.elems(), path))
		} else {
			args = append(args, fmt.Sprintf("out:%d:%s", p.elems(), path))
			outPaths = append(outPaths, path)
		}
	}
	if out, err := exec.Command(exe, args...).CombinedOutput(); err != nil {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	var outs [][]float32
	for _, path := range outPaths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(data)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		outs = append(outs, v)
	}
	return outs
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Each op at a couple of shapes: non-multiples of the vector width, rows
// narrower than one vector, and inputs that overflow exp without the max
// subtraction (softmax scale 100) or that make eps matter (eps 0.25).
type opTest struct {
	op            string
	dims          map[string]int
	eps           float64
	scale, offset float64
}

var opTests = []opTest{
	{"gemm", map[string]int{"M": 64, "N": 64, "K": 64}, 0, 1, 0},
	{"gemm", map[string]int{"M": 100, "N": 300, "K": 200}, 0, 1, 0},
	{"gemm", map[string]int{"M": 3, "N": 5, "K": 7}, 0, 1, 0},
	{"add", map[string]int{"M": 7, "N": 1000}, 0, 1, 0},
	{"add", map[string]int{"M": 3, "N": 5}, 0, 1, 0},
	{"sum", map[string]int{"M": 7, "N": 1000}, 0, 1, 0.5},
	{"sum", map[string]int{"M": 130, "N": 3}, 0, 1, 0},
	{"softmax", map[string]int{"M": 7, "N": 1000}, 0, 100, 0},
	{"softmax", map[string]int{"M": 33, "N": 20}, 0, 4, 0},
	{"rmsnorm", map[string]int{"M": 7, "N": 1000}, 0, 1, 0},
	{"rmsnorm", map[string]int{"M": 16, "N": 5}, 0.25, 1, 0},
	{"layernorm", map[string]int{"M": 7, "N": 1000}, 0, 1, 3},
	{"layernorm", map[string]int{"M": 40, "N": 17}, 0.25, 2, -1},
}

var sweep = flag.Bool("sweep", false, "also build and check TestOps at many more shapes (slow)")

// sweepTests add edge shapes: single elements, one row or column, widths
// one past and one short of vector multiples.
func sweepTests() []opTest {
	var ts []opTest
	for _, d := range [][3]int{{1, 1, 1}, {1, 1000, 3}, {17, 16, 1}, {5, 17, 33}, {65, 47, 31}, {33, 97, 64}, {128, 49, 15}, {257, 129, 130}} {
		ts = append(ts, opTest{"gemm", map[string]int{"M": d[0], "N": d[1], "K": d[2]}, 0, 1, 0})
	}
	for _, op := range []string{"add", "sum", "softmax", "rmsnorm", "layernorm"} {
		for _, d := range [][2]int{{1, 1}, {1, 15}, {2, 16}, {3, 17}, {9, 63}, {5, 64}, {4, 65}, {300, 7}, {1, 4099}} {
			ts = append(ts, opTest{op, map[string]int{"M": d[0], "N": d[1]}, 0, 1, 0.25})
		}
	}
	return ts
}

func TestOps(t *testing.T) {
	tests := opTests
	if *sweep {
		tests = append(tests, sweepTests()...)
	}
	wantFiles := []file{
		{"kernel.o", "object"}, {"entry.o", "object"}, {"entry.c", "source"}, {"kernel.h", "header"},
		{"kernel.stmt", "stmt"}, {"kernel.ll", "llvm"}, {"kernel.s", "asm"},
	}
	for _, tc := range tests {
		c := newCase(tc.op, tc.dims, tc.eps)
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			resp, workdir := build(t, c)
			if resp.Status != "built" {
				t.Fatalf("build(%s).Status = %q (%s), want built", c.ID, resp.Status, resp.Reason)
			}
			if resp.Protocol != 1 || resp.Kind != "object" {
				t.Errorf("build(%s) protocol, kind = %d, %q, want 1, object", c.ID, resp.Protocol, resp.Kind)
			}
			if !reflect.DeepEqual(resp.Files, wantFiles) {
				t.Errorf("build(%s).Files = %v, want %v", c.ID, resp.Files, wantFiles)
			}
			for _, f := range resp.Files {
				if st, err := os.Lstat(filepath.Join(workdir, f.Path)); err != nil || !st.Mode().IsRegular() {
					t.Errorf("build(%s): file %s: not a regular file (%v)", c.ID, f.Path, err)
				}
			}
			if resp.Entry == nil || resp.Entry.Symbol != "tilepipe_entry" || !reflect.DeepEqual(resp.Entry.Params, c.Signature) {
				t.Fatalf("build(%s).Entry = %+v, want tilepipe_entry with params %v", c.ID, resp.Entry, c.Signature)
			}
			if want := []string{"-lpthread", "-ldl", "-lm"}; !reflect.DeepEqual(resp.Link, want) {
				t.Errorf("build(%s).Link = %v, want %v", c.ID, resp.Link, want)
			}
			if tgt, _ := resp.Toolchain["target"].(string); !strings.Contains(tgt, "strict_float") {
				t.Errorf("build(%s).Toolchain.target = %q, want a strict_float target", c.ID, tgt)
			}
			if len(resp.Commands) == 0 || resp.Commands[len(resp.Commands)-1].Exit != 0 {
				t.Errorf("build(%s).Commands = %+v, want the entry.c compile with exit 0", c.ID, resp.Commands)
			}

			eps := tc.eps
			if eps == 0 {
				eps = 1e-5
			}
			in := inputs(c.Signature, c.Seed, tc.scale, tc.offset)
			outs := run(t, resp, workdir, c.Signature, in)
			want, mag := reference(tc.op, tc.dims, eps, in)
			got := outs[0]
			if len(got) != len(want) {
				t.Fatalf("%s: %d output elements, want %d", c.ID, len(got), len(want))
			}
			const rtol, atol = 1e-4, 1e-30
			bad := 0
			for i := range want {
				diff := math.Abs(float64(got[i]) - want[i])
				if !(diff <= rtol*mag[i]+atol) {
					if bad < 5 {
						t.Errorf("%s: out[%d] = %g, want %g (|diff| %.3g > tol %.3g)", c.ID, i, got[i], want[i], diff, rtol*mag[i]+atol)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d elements out of tolerance", c.ID, bad, len(want))
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	out, err := exec.Command(route, "describe").Output()
	if err != nil {
		t.Fatalf("route describe: %v", err)
	}
	var d struct {
		Protocol  int      `json:"protocol"`
		Name      string   `json:"name"`
		Kind      string   `json:"kind"`
		Version   string   `json:"version"`
		Available bool     `json:"available"`
		Reason    string   `json:"reason"`
		Ops       []string `json:"ops"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("route describe: %v\n%s", err, out)
	}
	if d.Protocol != 1 || d.Name != "halide" || d.Kind != "object" || !d.Available || d.Reason != "" {
		t.Errorf("describe = %+v, want protocol 1, name halide, kind object, available", d)
	}
	if !strings.HasPrefix(d.Version, "Halide 14.") {
		t.Errorf("describe.Version = %q, want Halide 14.x.y", d.Version)
	}
	if want := []string{"gemm", "add", "sum", "softmax", "rmsnorm", "layernorm"}; !reflect.DeepEqual(d.Ops, want) {
		t.Errorf("describe.Ops = %v, want %v", d.Ops, want)
	}
}

// TestRejects covers cases the route must not build: a signature that
// disagrees with the op (failed, naming the param), ops, dtypes and
// policies it does not implement (unsupported), and malformed cases.
func TestRejects(t *testing.T) {
	base := func() caseFile { return newCase("gemm", map[string]int{"M": 8, "N": 4, "K": 2}, 0) }
	tests := []struct {
		name       string
		edit       func(c *caseFile)
		status     string
		reasonPart string
	}{
		{"shape", func(c *caseFile) { c.Signature[1].Shape = []int{4, 2} }, "failed", "param 1 (B): shape [4, 2], route implements [2, 4]"},
		{"name", func(c *caseFile) { c.Signature[0].Name = "X" }, "failed", "param 0 (A): name \"X\""},
		{"role", func(c *caseFile) { c.Signature[2].Role = "input" }, "failed", "param 2 (C): role \"input\""},
		{"dtype", func(c *caseFile) { c.Signature[2].Dtype = "f64" }, "failed", "param 2 (C): dtype \"f64\""},
		{"count", func(c *caseFile) { c.Signature = c.Signature[:2] }, "failed", "case lists 2 params (A, B), route implements 3 (A, B, C)"},
		{"missing-dim", func(c *caseFile) { delete(c.Dims, "K") }, "failed", "needs K"},
		{"extra-dim", func(c *caseFile) { c.Dims["L"] = 3 }, "failed", "takes 3 dims"},
		{"zero-dim", func(c *caseFile) { c.Dims["M"] = 0 }, "failed", "dims.M"},
		{"bad-eps", func(c *caseFile) { c.Params = map[string]float64{"eps": 2} }, "failed", "params.eps"},
		{"op", func(c *caseFile) { c.Op = "conv2d" }, "unsupported", "op \"conv2d\""},
		{"case-dtype", func(c *caseFile) { c.Dtype = "f16" }, "unsupported", "dtype \"f16\""},
		{"policy", func(c *caseFile) { c.Policy = "fast-math" }, "unsupported", "policy \"fast-math\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			resp, _ := build(t, c)
			if resp.Status != tc.status || !strings.Contains(resp.Reason, tc.reasonPart) {
				t.Errorf("build(%s) = %s %q, want %s with %q", tc.name, resp.Status, resp.Reason, tc.status, tc.reasonPart)
			}
			if resp.Entry != nil || len(resp.Files) != 0 {
				t.Errorf("build(%s) lists entry %+v and files %v, want none", tc.name, resp.Entry, resp.Files)
			}
		})
	}
}

func TestMalformedCase(t *testing.T) {
	tests := []struct {
		name, text, reasonPart string
	}{
		{"truncated", `{"id": "x", "op": "gemm"`, "invalid JSON"},
		{"trailing-comma", `{"id": "x",}`, "invalid JSON"},
		{"duplicate", `{"id": "x", "id": "y"}`, "duplicate member"},
		{"not-object", `[1, 2]`, "want a JSON object"},
		{"dims-type", `{"id": "x", "op": "add", "dtype": "f32", "policy": "strict", "dims": {"M": 1.5, "N": 2}, "signature": []}`, "dims.M"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "case.json")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(route, "build", "--case", path, "--workdir", filepath.Join(dir, "w")).Output()
			if err != nil {
				t.Fatalf("route build: %v", err)
			}
			var resp response
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatalf("route build: %v\n%s", err, out)
			}
			if resp.Status != "failed" || !strings.Contains(resp.Reason, tc.reasonPart) {
				t.Errorf("build(%s) = %s %q, want failed with %q", tc.name, resp.Status, resp.Reason, tc.reasonPart)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := [][]string{
		{},
		{"frobnicate"},
		{"build"},
		{"build", "--case", "c.json"},
		{"build", "--case", "c.json", "--workdir"},
		{"build", "--case", "c.json", "--workdir", "w", "--extra", "x"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			cmd := exec.Command(route, args...)
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != 2 || len(out) != 0 {
				t.Errorf("route %v = exit %d, stdout %q, want exit 2 and no stdout", args, code, out)
			}
		})
	}
}

// TestDriverDetects shows that the checks TestOps relies on can fail: each
// deliberately broken entry in testdata/fake_entry.c must be caught.
func TestDriverDetects(t *testing.T) {
	tests := []struct {
		fake int
		want string
	}{
		{0, ""},
		{1, "guard_overwritten: p1 after byte 0"},
		{2, "output_not_overwritten: p1 element 3"},
		{3, "input_mutated: p0"},
		{4, "not_repeatable: p1"},
		{5, "entry_failed: returned 7"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("fake", tc.fake), func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "driver")
			out, err := exec.Command("cc", fmt.Sprintf("-DFAKE=%d", tc.fake), "-o", exe, driverObj, "testdata/fake_entry.c").CombinedOutput()
			if err != nil {
				t.Fatalf("cc fake_entry.c: %v\n%s", err, out)
			}
			in := filepath.Join(dir, "in.bin")
			if err := os.WriteFile(in, f32bytes([]float32{1, 2, 3, 4}), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err = exec.Command(exe, "in:4:"+in, "out:4:"+filepath.Join(dir, "out.bin")).CombinedOutput()
			got := strings.TrimSpace(string(out))
			if tc.want == "" {
				if err != nil {
					t.Errorf("driver(fake %d) = %v %q, want success", tc.fake, err, got)
				}
				return
			}
			if err == nil || got != tc.want {
				t.Errorf("driver(fake %d) = %v %q, want failure %q", tc.fake, err, got, tc.want)
			}
		})
	}
}

// FuzzBuildCase feeds arbitrary case files to the route: whatever the
// input, it must exit 0 and print exactly one response whose status is one
// of the protocol's, even when reasons echo bytes that are not UTF-8.
func FuzzBuildCase(f *testing.F) {
	f.Add([]byte(`{"id": "x", "op": "gemm"`))
	f.Add([]byte(`{"id": "x", "op": "conv\u0000\ud83d\ude00", "dims": {}, "dtype": "f32", "policy": "strict", "signature": []}`))
	f.Add([]byte("{\"id\": \"x\", \"op\": \"\xff\xfe\x01\", \"dims\": {}, \"dtype\": \"f32\", \"policy\": \"strict\", \"signature\": []}"))
	f.Add([]byte(`{"id": "x", "op": "sum", "dims": {"M": 2, "N": 1e400}, "dtype": "f32", "policy": "strict", "signature": []}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`))
	f.Add([]byte(`{"id": "x", "op": "add", "dims": {"M": 2, "N": 2}, "dtype": "f32", "policy": "strict", "signature": [{"name": "A", "role": "input", "dtype": "f32", "shape": [2, -2]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "case.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(route, "build", "--case", path, "--workdir", filepath.Join(dir, "w")).Output()
		if err != nil {
			t.Fatalf("route build(%q): %v", data, err)
		}
		var resp response
		dec := json.NewDecoder(bytes.NewReader(out))
		if err := dec.Decode(&resp); err != nil || dec.More() {
			t.Fatalf("route build(%q) = %q, want one JSON response (%v)", data, out, err)
		}
		switch resp.Status {
		case "built", "failed", "unsupported":
		default:
			t.Fatalf("route build(%q).Status = %q, want built, failed or unsupported", data, resp.Status)
		}
	})
}
