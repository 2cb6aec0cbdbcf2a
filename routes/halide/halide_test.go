package halide_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/tilepipe/tilepipe/internal/protocol"
	"github.com/tilepipe/tilepipe/oracle"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// route and driverObj are built once by TestMain: the route with its own
// Makefile (or, when TILEPIPE_ROUTES is set, the one make test built), the driver (testdata/driver.c, a stand-in for the timer) with cc.
var (
	route     string
	routeCUDA string // the halide-cuda route, the same source with -DTP_HALIDE_CUDA
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
	if d := os.Getenv("TILEPIPE_ROUTES"); d != "" {
		// make test built the route from these sources already; make
		// itself cannot take a BIN with a space, which TMPDIR may hold.
		route = filepath.Join(d, "halide", "route")
		routeCUDA = filepath.Join(d, "halide-cuda", "route")
	} else {
		bin := filepath.Join(dir, "bin")
		if strings.ContainsAny(bin, " \t") {
			fmt.Fprintf(os.Stderr, "make BIN=%q: make cannot take a path with a space; set TMPDIR to one without, or TILEPIPE_ROUTES to the built routes (make test does)\n", bin)
			return 1
		}
		if out, err := exec.Command("make", "-j2", "BIN="+bin, "BIN_CUDA="+filepath.Join(dir, "bin-cuda")).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "make BIN=%s: %v\n%s", bin, err, out)
			return 1
		}
		route = filepath.Join(bin, "route")
		routeCUDA = filepath.Join(dir, "bin-cuda", "route")
	}
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
	Ranking   string             `json:"ranking,omitempty"`
	Params    map[string]float64 `json:"params,omitempty"`
	Signature []param            `json:"signature"`
	Threads   int                `json:"threads"`
	Device    string             `json:"device,omitempty"`
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

// signature is op's tensor list with float tensors stored in f: exactly
// what capture sends a route (oracle.SignatureOf, docs/protocol.md).
func signature(op string, d map[string]int, f string) []param {
	var out []param
	for _, p := range oracle.SignatureOf(op, d, f) {
		out = append(out, param(p))
	}
	return out
}

// An opTest is one case: op and dims, storage dtype ("" is f32), the input
// pattern (normal: scale*u+offset; ties: a few values including both
// zeros), eps for the norms (0: the default) and the ranking contract.
type opTest struct {
	op            string
	dims          map[string]int
	dtype         string
	pattern       string
	eps           float64
	scale, offset float64
	ranking       string
}

var dimOrder = []string{"B", "Hq", "Hkv", "M", "Q", "N", "K", "R", "V", "D", "Dv"}

func newCase(tc opTest) caseFile {
	dtype := tc.dtype
	if dtype == "" {
		dtype = "f32"
	}
	pattern := tc.pattern
	if pattern == "" {
		pattern = "normal"
	}
	c := caseFile{
		Op: tc.op, Dims: tc.dims, Dtype: dtype, Pattern: pattern, Seed: 1, Policy: "strict", Ranking: tc.ranking,
		Signature: signature(tc.op, tc.dims, dtype), Threads: 2,
	}
	if tc.eps != 0 {
		c.Params = map[string]float64{"eps": tc.eps}
	}
	var parts []string
	for _, k := range dimOrder {
		if v, ok := tc.dims[k]; ok {
			parts = append(parts, fmt.Sprint(v))
		}
	}
	c.ID = tc.op + "-" + strings.Join(parts, "x") + "-" + dtype
	if pattern != "normal" {
		c.ID += "-" + pattern
	}
	if tc.ranking != "" {
		c.ID += "-" + tc.ranking
	}
	return c
}

// build runs `route build` on c in a fresh workdir; the route must exit 0
// and print exactly one JSON object.
func build(t *testing.T, c any) (resp response, workdir string) {
	t.Helper()
	return buildWith(t, route, c)
}

// buildWith is build with the route program exe.
func buildWith(t *testing.T, exe string, c any) (resp response, workdir string) {
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
	cmd := exec.Command(exe, "build", "--case", casePath, "--workdir", workdir)
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

func (r *rng) next() uint64 {
	*r ^= *r >> 12
	*r ^= *r << 25
	*r ^= *r >> 27
	return uint64(*r) * 2685821657736338717
}

// float is uniform in [-1, 1).
func (r *rng) float() float64 {
	return float64(r.next()>>11)/float64(1<<53)*2 - 1
}

// intn is uniform enough in [0, n) for test inputs.
func (r *rng) intn(n int) int64 {
	return int64((r.next() >> 11) % uint64(n))
}

// tensor is one param's little-endian bytes with its dtype.
type tensor struct {
	dtype string
	raw   []byte
}

func dtypeSize(dtype string) int {
	switch dtype {
	case "f16", "bf16":
		return 2
	case "i64":
		return 8
	}
	return 4
}

func (t tensor) len() int { return len(t.raw) / dtypeSize(t.dtype) }

// bits is element i's raw bits.
func (t tensor) bits(i int) uint64 {
	switch dtypeSize(t.dtype) {
	case 2:
		return uint64(binary.LittleEndian.Uint16(t.raw[2*i:]))
	case 8:
		return binary.LittleEndian.Uint64(t.raw[8*i:])
	}
	return uint64(binary.LittleEndian.Uint32(t.raw[4*i:]))
}

// float is element i's value (exact: every storage dtype widens exactly).
func (t tensor) float(i int) float64 {
	b := t.bits(i)
	switch t.dtype {
	case "f16":
		return f16value(uint16(b))
	case "bf16":
		return float64(math.Float32frombits(uint32(b) << 16))
	case "i64":
		return float64(int64(b))
	}
	return float64(math.Float32frombits(uint32(b)))
}

func (t tensor) int(i int) int64 { return int64(t.bits(i)) }

func f16value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * m * math.Pow(2, -24)
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

// f16bits encodes v, which must be zero or a normal f16 value exactly.
func f16bits(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	if v == 0 {
		return sign
	}
	e := int((b>>23)&0xff) - 127 + 15
	return sign | uint16(e)<<10 | uint16((b&0x7fffff)>>13)
}

func newTensor(dtype string, n int) tensor {
	return tensor{dtype, make([]byte, n*dtypeSize(dtype))}
}

func (t tensor) setFloat(i int, v float32) {
	switch t.dtype {
	case "f16":
		binary.LittleEndian.PutUint16(t.raw[2*i:], f16bits(v))
	case "bf16":
		binary.LittleEndian.PutUint16(t.raw[2*i:], uint16(math.Float32bits(v)>>16))
	default:
		binary.LittleEndian.PutUint32(t.raw[4*i:], math.Float32bits(v))
	}
}

// tieValues holds the ties pattern: few distinct values, both zeros.
var tieValues = []float32{-2, -1, -0.5, float32(math.Copysign(0, -1)), 0, 0.5, 1, 2}

// inputs fills each input param: index tensors uniformly over their range,
// float tensors from tc's pattern. Half storage gets multiples of 1/64 of
// magnitude at most 4, exact in both f16 and bf16.
func inputs(c caseFile, tc opTest) []tensor {
	r := rng(c.Seed*0x9E3779B97F4A7C15 + 1)
	var out []tensor
	for _, p := range c.Signature {
		if p.Role != "input" {
			continue
		}
		t := newTensor(p.Dtype, p.elems())
		for i := 0; i < p.elems(); i++ {
			if p.Dtype == "i64" {
				bound := c.Dims["N"]
				if c.Op == "embedding" {
					bound = c.Dims["V"]
				}
				binary.LittleEndian.PutUint64(t.raw[8*i:], uint64(r.intn(bound)))
				continue
			}
			var v float32
			if tc.pattern == "ties" {
				v = tieValues[r.intn(len(tieValues))]
			} else {
				v = float32(tc.scale*r.float() + tc.offset)
			}
			if p.Dtype != "f32" {
				v = float32(math.Max(-4, math.Min(4, math.Round(float64(v)*64)/64)))
			}
			t.setFloat(i, v)
		}
		out = append(out, t)
	}
	return out
}

// run links the case's objects with the driver, runs it on in and returns
// the outputs; the driver fails on any guard, poison, input or repeat check.
func run(t *testing.T, resp response, workdir string, sig []param, in []tensor) []tensor {
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
	var outs []tensor
	var outPaths []string
	k := 0
	for i, p := range sig {
		path := filepath.Join(workdir, fmt.Sprintf("p%d.bin", i))
		if p.Role == "input" {
			if err := os.WriteFile(path, in[k].raw, 0o644); err != nil {
				t.Fatal(err)
			}
			k++
			args = append(args, fmt.Sprintf("in:%s:%d:%s", p.Dtype, p.elems(), path))
		} else {
			args = append(args, fmt.Sprintf("out:%s:%d:%s", p.Dtype, p.elems(), path))
			outPaths = append(outPaths, path)
			outs = append(outs, tensor{dtype: p.Dtype})
		}
	}
	if out, err := exec.Command(exe, args...).CombinedOutput(); err != nil {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	for i, path := range outPaths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		outs[i].raw = data
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

func dims(kv ...any) map[string]int {
	d := map[string]int{}
	for i := 0; i < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1].(int)
	}
	return d
}

// Each op at a couple of shapes: non-multiples of the vector width, rows
// narrower than one vector, inputs that overflow exp without the max
// subtraction (scale 100) or that make eps matter (eps 0.25), rope tails,
// topk with K=1 and K=N, ties with both zeros, and half storage.
var opTests = []opTest{
	{op: "gemm", dims: dims("M", 64, "N", 64, "K", 64), scale: 1},
	{op: "gemm", dims: dims("M", 100, "N", 300, "K", 200), scale: 1},
	{op: "gemm", dims: dims("M", 3, "N", 5, "K", 7), scale: 1},
	{op: "gemm_relu", dims: dims("M", 33, "N", 40, "K", 17), scale: 1, offset: -0.2},
	{op: "gemm_gelu", dims: dims("M", 20, "N", 50, "K", 9), scale: 2},
	{op: "bmm", dims: dims("B", 3, "M", 17, "N", 20, "K", 9), scale: 1},
	{op: "gemv", dims: dims("M", 37, "K", 100), scale: 1},
	{op: "gemv", dims: dims("M", 5, "K", 3), scale: 1},
	{op: "add", dims: dims("M", 7, "N", 1000), scale: 1},
	{op: "add", dims: dims("M", 3, "N", 5), scale: 1},
	{op: "gelu_add", dims: dims("M", 7, "N", 333), scale: 3},
	{op: "sigmoid_pair", dims: dims("M", 7, "N", 333), scale: 6},
	{op: "gelu_pair", dims: dims("M", 9, "N", 100), scale: 4},
	{op: "swiglu", dims: dims("M", 5, "N", 77), scale: 4},
	{op: "rope", dims: dims("M", 6, "N", 40, "R", 24), scale: 1},
	{op: "rope", dims: dims("M", 3, "N", 9, "R", 4), scale: 1},
	{op: "rope", dims: dims("M", 2, "N", 32, "R", 32), scale: 1},
	{op: "sum", dims: dims("M", 7, "N", 1000), scale: 1, offset: 0.5},
	{op: "sum", dims: dims("M", 130, "N", 3), scale: 1},
	{op: "max", dims: dims("M", 7, "N", 1000), scale: 1},
	{op: "max", dims: dims("M", 130, "N", 3), pattern: "ties"},
	{op: "softmax", dims: dims("M", 7, "N", 1000), scale: 100},
	{op: "softmax", dims: dims("M", 33, "N", 20), scale: 4},
	{op: "rmsnorm", dims: dims("M", 7, "N", 1000), scale: 1},
	{op: "rmsnorm", dims: dims("M", 16, "N", 5), eps: 0.25, scale: 1},
	{op: "layernorm", dims: dims("M", 7, "N", 1000), scale: 1, offset: 3},
	{op: "layernorm", dims: dims("M", 40, "N", 17), eps: 0.25, scale: 2, offset: -1},
	{op: "residual_layernorm", dims: dims("M", 7, "N", 1000), scale: 1, offset: 1},
	{op: "residual_layernorm", dims: dims("M", 40, "N", 17), eps: 0.25, scale: 2},
	{op: "cross_entropy", dims: dims("M", 7, "N", 1000), scale: 100},
	{op: "cross_entropy", dims: dims("M", 33, "N", 20), scale: 4},
	{op: "scan_ordered", dims: dims("M", 7, "N", 1000), scale: 1, offset: 0.1},
	{op: "scan_ordered", dims: dims("M", 300, "N", 50), scale: 1},
	{op: "scan", dims: dims("M", 7, "N", 1000), scale: 1, offset: 0.1},
	{op: "scan", dims: dims("M", 33, "N", 17), scale: 1},
	{op: "argmax", dims: dims("M", 7, "N", 1000), scale: 1},
	{op: "argmax", dims: dims("M", 130, "N", 40), pattern: "ties"},
	{op: "argmax", dims: dims("M", 1, "N", 1), scale: 1},
	{op: "topk", dims: dims("M", 7, "N", 100, "K", 7), scale: 1, ranking: "stable"},
	{op: "topk", dims: dims("M", 5, "N", 40, "K", 1), pattern: "ties", ranking: "stable"},
	{op: "topk", dims: dims("M", 9, "N", 33, "K", 33), pattern: "ties", ranking: "standard"},
	{op: "sort", dims: dims("M", 6, "N", 50), pattern: "ties", ranking: "stable"},
	{op: "sort", dims: dims("M", 3, "N", 17), scale: 1, ranking: "stable"},
	{op: "embedding", dims: dims("V", 50, "D", 40, "M", 9), scale: 1},
	{op: "embedding", dims: dims("V", 7, "D", 3, "M", 20), scale: 1},
	{op: "attention", dims: dims("B", 2, "Hq", 4, "Hkv", 2, "Q", 5, "K", 9, "D", 16, "Dv", 8), scale: 1},
	{op: "attention", dims: dims("B", 1, "Hq", 3, "Hkv", 1, "Q", 1, "K", 20, "D", 20, "Dv", 24), scale: 2},
	{op: "attention", dims: dims("B", 1, "Hq", 2, "Hkv", 2, "Q", 17, "K", 17, "D", 8, "Dv", 17), scale: 1},
	{op: "gemm", dims: dims("M", 33, "N", 40, "K", 17), dtype: "f16", scale: 1},
	{op: "gemm_gelu", dims: dims("M", 33, "N", 40, "K", 17), dtype: "bf16", scale: 1},
	{op: "bmm", dims: dims("B", 2, "M", 9, "N", 20, "K", 5), dtype: "bf16", scale: 1},
	{op: "gemv", dims: dims("M", 37, "K", 100), dtype: "f16", scale: 1},
	{op: "sigmoid_pair", dims: dims("M", 7, "N", 333), dtype: "bf16", scale: 3},
	{op: "swiglu", dims: dims("M", 5, "N", 77), dtype: "f16", scale: 3},
	{op: "rope", dims: dims("M", 6, "N", 40, "R", 24), dtype: "f16", scale: 1},
	{op: "rmsnorm", dims: dims("M", 7, "N", 100), dtype: "f16", scale: 1},
	{op: "layernorm", dims: dims("M", 7, "N", 100), dtype: "bf16", scale: 1, offset: 1},
	{op: "residual_layernorm", dims: dims("M", 9, "N", 50), dtype: "f16", scale: 1},
}

var sweep = flag.Bool("sweep", false, "also build and check TestOps at many more shapes (slow)")

// sweepTests add edge shapes: single elements, one row or column, widths
// one past and one short of vector multiples.
func sweepTests() []opTest {
	var ts []opTest
	for _, d := range [][3]int{{1, 1, 1}, {1, 1000, 3}, {17, 16, 1}, {5, 17, 33}, {65, 47, 31}, {33, 97, 64}, {128, 49, 15}, {257, 129, 130}} {
		for _, op := range []string{"gemm", "gemm_relu", "gemm_gelu"} {
			ts = append(ts, opTest{op: op, dims: dims("M", d[0], "N", d[1], "K", d[2]), scale: 1})
		}
	}
	for _, op := range []string{"add", "gelu_add", "sigmoid_pair", "gelu_pair", "swiglu", "sum", "max", "softmax", "rmsnorm", "layernorm",
		"residual_layernorm", "cross_entropy", "scan_ordered", "scan", "argmax"} {
		for _, d := range [][2]int{{1, 1}, {1, 15}, {2, 16}, {3, 17}, {9, 63}, {5, 64}, {4, 65}, {300, 7}, {1, 4099}} {
			ts = append(ts, opTest{op: op, dims: dims("M", d[0], "N", d[1]), scale: 1, offset: 0.25})
		}
	}
	for _, d := range [][2]int{{1, 1}, {2, 16}, {3, 17}, {4, 65}, {2, 513}} {
		ts = append(ts, opTest{op: "sort", dims: dims("M", d[0], "N", d[1]), pattern: "ties", ranking: "stable"})
		ts = append(ts, opTest{op: "topk", dims: dims("M", d[0], "N", d[1], "K", (d[1]+1)/2), pattern: "ties", ranking: "stable"})
	}
	for _, f := range []string{"f16", "bf16"} {
		for _, op := range []string{"add", "gelu_add", "gelu_pair", "rmsnorm", "layernorm"} {
			ts = append(ts, opTest{op: op, dims: dims("M", 3, "N", 17), dtype: f, scale: 1})
		}
		ts = append(ts, opTest{op: "gemm_relu", dims: dims("M", 65, "N", 47, "K", 31), dtype: f, scale: 1})
		ts = append(ts, opTest{op: "rope", dims: dims("M", 5, "N", 33, "R", 2), dtype: f, scale: 1})
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
		c := newCase(tc)
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !slices.Contains([]string{"gemm", "add", "softmax", "attention"}, tc.op) {
				t.Skip("long: a Halide compile of seconds; make test builds every op, -short a gemm, an add, a softmax and an attention")
			}
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

			in := inputs(c, tc)
			outs := run(t, resp, workdir, c.Signature, in)
			eps := tc.eps
			if eps == 0 {
				eps = 1e-5
			}
			want := reference(tc.op, tc.dims, eps, in)
			if len(want) != len(outs) {
				t.Fatalf("%s: reference has %d outputs, route %d", c.ID, len(want), len(outs))
			}
			var outParams []param
			for _, p := range c.Signature {
				if p.Role == "output" {
					outParams = append(outParams, p)
				}
			}
			for i, e := range want {
				compare(t, c.ID+" "+outParams[i].Name, outs[i], e)
			}
		})
	}
}
func TestDescribe(t *testing.T) {
	out, err := exec.Command(route, "describe").Output()
	if err != nil {
		t.Fatalf("route describe: %v", err)
	}
	d, err := protocol.ParseDescription(out)
	if err != nil {
		t.Fatalf("route describe: %v\n%s", err, out)
	}
	if d.Protocol != 1 || d.Name != "halide" || d.Kind != "object" || !d.Available || d.Reason != "" {
		t.Errorf("describe = %+v, want protocol 1, name halide, kind object, available", d)
	}
	if !strings.HasPrefix(d.Version, "Halide 14.") {
		t.Errorf("describe.Version = %q, want Halide 14.x.y", d.Version)
	}
	want := []string{"gemm", "gemm_relu", "gemm_gelu", "bmm", "gemv", "add", "gelu_add", "sigmoid_pair", "gelu_pair", "swiglu", "rope",
		"sum", "max", "softmax", "rmsnorm", "layernorm", "residual_layernorm", "cross_entropy", "scan_ordered", "scan",
		"argmax", "topk", "sort", "embedding", "attention"}
	if !reflect.DeepEqual(d.Ops, want) {
		t.Errorf("describe.Ops = %v, want %v", d.Ops, want)
	}
}

// TestRejects covers cases the route must not build: a signature that
// disagrees with the op (failed, naming the param), ops, dtypes and
// policies it does not implement (unsupported), and malformed cases.
func TestRejects(t *testing.T) {
	base := func() caseFile { return newCase(opTest{op: "gemm", dims: dims("M", 8, "N", 4, "K", 2)}) }
	// with replaces the case by op at d, with its own signature.
	with := func(c *caseFile, op string, d map[string]int, dtype string) {
		*c = newCase(opTest{op: op, dims: d, dtype: dtype})
	}
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
		{"case-dtype", func(c *caseFile) { c.Dtype = "f64" }, "unsupported", "dtype \"f64\""},
		{"half-sum", func(c *caseFile) { with(c, "sum", dims("M", 2, "N", 3), "f16") }, "unsupported", "dtype \"f16\" is not implemented for sum"},
		{"half-attention", func(c *caseFile) {
			with(c, "attention", dims("B", 1, "Hq", 2, "Hkv", 1, "Q", 2, "K", 3, "D", 4, "Dv", 4), "bf16")
		}, "unsupported", "dtype \"bf16\" is not implemented for attention"},
		{"sort-long-rows", func(c *caseFile) {
			with(c, "sort", dims("M", 5, "N", 16384), "")
			c.Ranking = "stable"
		}, "unsupported", "M*N^2 = 1342177280 compares exceeds this route's limit of 1073741824"},
		{"topk-many-rows", func(c *caseFile) {
			with(c, "topk", dims("M", 257, "N", 2048, "K", 4), "")
			c.Ranking = "standard"
		}, "unsupported", "M*N^2"},
		{"no-ranking", func(c *caseFile) { with(c, "sort", dims("M", 2, "N", 3), "") }, "failed", "case: ranking: op sort wants"},
		{"stray-ranking", func(c *caseFile) { c.Ranking = "stable" }, "failed", "op gemm has no ranking contract"},
		{"rope-odd", func(c *caseFile) { with(c, "rope", dims("M", 2, "N", 8, "R", 3), "") }, "failed", "even R <= N"},
		{"topk-k", func(c *caseFile) {
			with(c, "topk", dims("M", 2, "N", 3, "K", 4), "")
			c.Ranking = "stable"
		}, "failed", "K <= N"},
		{"gqa", func(c *caseFile) {
			with(c, "attention", dims("B", 1, "Hq", 3, "Hkv", 2, "Q", 2, "K", 3, "D", 4, "Dv", 4), "")
		}, "failed", "Hq a multiple of Hkv"},
		{"index-dtype", func(c *caseFile) {
			with(c, "embedding", dims("V", 4, "D", 2, "M", 3), "")
			c.Signature[1].Dtype = "f32"
		}, "failed", "param 1 (I): dtype \"f32\", route implements \"i64\""},
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
			out, err = exec.Command(exe, "in:f32:4:"+in, "out:f32:4:"+filepath.Join(dir, "out.bin")).CombinedOutput()
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
