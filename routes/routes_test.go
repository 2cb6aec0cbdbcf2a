package routes_test

// These tests drive the built-in openblas and torch-eager routes through the
// route and visit protocols (docs/protocol.md) for real: describe, build,
// and, for torch-eager, timed visits whose outputs are checked against a
// float64 computation.
//
// A route that describes itself unavailable makes its tests skip with the
// route's reason, unless TILEPIPE_REQUIRE_ROUTES=1, which turns the skip into
// a failure (for machines where `make test` installed the libraries).
//
// wrapper.py also accepts test-only ops whose names start with an underscore
// (_mutate_input, _overrun_output, ...). Each breaks exactly one rule a visit
// checks; describe never offers them and build answers unsupported.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const cmdTimeout = 120 * time.Second

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

type describeResp struct {
	Protocol  int      `json:"protocol"`
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	Version   string   `json:"version"`
	Available bool     `json:"available"`
	Reason    string   `json:"reason"`
	Ops       []string `json:"ops"`
}

type fileResp struct {
	Path string `json:"path"`
	Role string `json:"role"`
}

type processResp struct {
	Interpreter  string            `json:"interpreter"`
	Script       string            `json:"script"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	OutputPolicy string            `json:"output_policy"`
}

type buildResp struct {
	Protocol int        `json:"protocol"`
	Status   string     `json:"status"`
	Reason   string     `json:"reason"`
	Kind     string     `json:"kind"`
	Files    []fileResp `json:"files"`
	Entry    *struct {
		Symbol string  `json:"symbol"`
		Params []param `json:"params"`
	} `json:"entry"`
	Link      []string        `json:"link"`
	Process   *processResp    `json:"process"`
	Toolchain map[string]any  `json:"toolchain"`
	Commands  []commandResp   `json:"commands"`
	Schedule  json.RawMessage `json:"schedule"`
}

type commandResp struct {
	Argv []string `json:"argv"`
	Exit int      `json:"exit"`
}

type visitResp struct {
	Protocol       int               `json:"protocol"`
	Status         string            `json:"status"`
	Reason         string            `json:"reason"`
	Checks         map[string]string `json:"checks"`
	CallsPerSample int               `json:"calls_per_sample"`
	BatchNs        []int64           `json:"batch_ns"`
	SingleNs       []int64           `json:"single_ns"`
	Clock          string            `json:"clock"`
	Threads        int               `json:"threads"`
	OutputPolicy   string            `json:"output_policy"`
}

// signature is the protocol's tensor list for op (docs/protocol.md).
func signature(op string, dims map[string]int) []param {
	M, N, K := dims["M"], dims["N"], dims["K"]
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

func dimsFor(op string) map[string]int {
	if op == "gemm" {
		return map[string]int{"M": 7, "N": 12, "K": 5}
	}
	return map[string]int{"M": 5, "N": 33}
}

const eps = 1e-5

// run runs argv in dir and returns its stdout; it fails the test on a
// non-zero exit, printing stderr.
func run(t *testing.T, dir string, env []string, argv ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// decode parses out as exactly one JSON object into v.
func decode(t *testing.T, what string, out []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decode %q: %v", what, out, err)
	}
	if dec.More() {
		t.Fatalf("%s: stdout holds more than one JSON document: %q", what, out)
	}
}

func routeExe(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(name, "route"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var describeCache sync.Map // route name -> describeResp

func describe(t *testing.T, name string) describeResp {
	t.Helper()
	if d, ok := describeCache.Load(name); ok {
		return d.(describeResp)
	}
	var d describeResp
	decode(t, name+" describe", run(t, ".", nil, routeExe(t, name), "describe"), &d)
	describeCache.Store(name, d)
	return d
}

// requireRoute skips t when the route says it is unavailable here.
func requireRoute(t *testing.T, name string) describeResp {
	t.Helper()
	d := describe(t, name)
	if !d.Available {
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
			t.Fatalf("route %s unavailable with TILEPIPE_REQUIRE_ROUTES=1: %s", name, d.Reason)
		}
		t.Skipf("route %s unavailable: %s", name, d.Reason)
	}
	return d
}

// build writes the case for op and runs `route build`; it returns the
// response and the work directory.
func build(t *testing.T, route, op string, dims map[string]int, sig []param) (buildResp, string) {
	t.Helper()
	tmp := t.TempDir()
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	id := op
	for _, k := range []string{"M", "N", "K"} {
		if v, ok := dims[k]; ok {
			id += fmt.Sprintf("-%s%d", k, v)
		}
	}
	c := map[string]any{
		"id": id, "op": op, "dims": dims, "dtype": "f32", "pattern": "normal",
		"seed": 1, "policy": "strict", "params": map[string]float64{"eps": eps},
		"signature": sig, "threads": 1,
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	casePath := filepath.Join(tmp, "case.json")
	if err := os.WriteFile(casePath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	var b buildResp
	out := run(t, tmp, nil, routeExe(t, route), "build", "--case", casePath, "--workdir", work)
	decode(t, route+" build "+op, out, &b)
	if b.Protocol != 1 {
		t.Errorf("%s build %s: protocol = %d, want 1", route, op, b.Protocol)
	}
	return b, work
}

// pattern is a deterministic input in [-1, 1); salt keeps tensors apart.
func pattern(n, salt int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((i*37+salt*11+5)%101-50) / 50
	}
	return x
}

func writeF32(t *testing.T, path string, x []float32) {
	t.Helper()
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readF32(t *testing.T, path string, n int) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4*n {
		t.Fatalf("%s: %d bytes, want %d", path, len(b), 4*n)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

// reference computes op's outputs in float64 from the float32 inputs.
func reference(op string, dims map[string]int, in map[string][]float32) []float64 {
	M, N, K := dims["M"], dims["N"], dims["K"]
	f := func(name string, i int) float64 { return float64(in[name][i]) }
	switch op {
	case "gemm":
		y := make([]float64, M*N)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				var s float64
				for k := 0; k < K; k++ {
					s += f("A", i*K+k) * f("B", k*N+j)
				}
				y[i*N+j] = s
			}
		}
		return y
	case "add":
		y := make([]float64, M*N)
		for i := range y {
			y[i] = f("A", i) + f("B", i)
		}
		return y
	case "sum":
		y := make([]float64, M)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				y[i] += f("X", i*N+j)
			}
		}
		return y
	}
	y := make([]float64, M*N)
	for i := 0; i < M; i++ {
		row := func(j int) float64 { return f("X", i*N+j) }
		switch op {
		case "softmax":
			mx := math.Inf(-1)
			for j := 0; j < N; j++ {
				mx = math.Max(mx, row(j))
			}
			var s float64
			for j := 0; j < N; j++ {
				s += math.Exp(row(j) - mx)
			}
			for j := 0; j < N; j++ {
				y[i*N+j] = math.Exp(row(j)-mx) / s
			}
		case "rmsnorm":
			var ss float64
			for j := 0; j < N; j++ {
				ss += row(j) * row(j)
			}
			r := 1 / math.Sqrt(ss/float64(N)+eps)
			for j := 0; j < N; j++ {
				y[i*N+j] = row(j) * r * f("W", j)
			}
		case "layernorm":
			var mean, v float64
			for j := 0; j < N; j++ {
				mean += row(j)
			}
			mean /= float64(N)
			for j := 0; j < N; j++ {
				v += (row(j) - mean) * (row(j) - mean)
			}
			r := 1 / math.Sqrt(v/float64(N)+eps)
			for j := 0; j < N; j++ {
				y[i*N+j] = (row(j)-mean)*r*f("W", j) + f("B", j)
			}
		}
	}
	return y
}

// inputs writes every input of sig under dir and returns them by name.
func inputs(t *testing.T, dir string, sig []param) map[string][]float32 {
	t.Helper()
	in := map[string][]float32{}
	for i, p := range sig {
		if p.Role != "input" {
			continue
		}
		in[p.Name] = pattern(p.elems(), i)
		writeF32(t, filepath.Join(dir, p.Name+".bin"), in[p.Name])
	}
	return in
}

// checkClose compares got with want at 1e-4 relative to max(|want|, 1);
// the inputs are O(1), so the floor only matters near zero.
func checkClose(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	bad := 0
	for i := range want {
		g := float64(got[i])
		if !(math.Abs(g-want[i]) <= 1e-4*math.Max(math.Abs(want[i]), 1)) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g", what, i, g, want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements outside tolerance", what, bad, len(want))
	}
}

func TestDescribe(t *testing.T) {
	allOps := []string{"gemm", "add", "sum", "softmax", "rmsnorm", "layernorm"}
	for _, tc := range []struct {
		route, kind string
		ops         []string
	}{
		{"openblas", "object", []string{"gemm"}},
		{"torch-eager", "process", allOps},
	} {
		t.Run(tc.route, func(t *testing.T) {
			t.Parallel()
			d := describe(t, tc.route)
			if d.Protocol != 1 || d.Name != tc.route || d.Kind != tc.kind || !slices.Equal(d.Ops, tc.ops) {
				t.Errorf("%s describe = %+v, want protocol 1, name %s, kind %s, ops %v", tc.route, d, tc.route, tc.kind, tc.ops)
			}
			if d.Available && (d.Version == "" || d.Reason != "") {
				t.Errorf("%s describe: available with version %q, reason %q; want a version and no reason", tc.route, d.Version, d.Reason)
			}
			if !d.Available && d.Reason == "" {
				t.Errorf("%s describe: unavailable without a reason", tc.route)
			}
			t.Logf("%s: available=%v version=%q reason=%q", tc.route, d.Available, d.Version, d.Reason)
			requireRoute(t, tc.route)
		})
	}
}

func TestOpenBLASBuildGemm(t *testing.T) {
	t.Parallel()
	requireRoute(t, "openblas")
	dims := dimsFor("gemm")
	sig := signature("gemm", dims)
	b, work := build(t, "openblas", "gemm", dims, sig)
	if b.Status != "built" || b.Reason != "" || b.Kind != "object" {
		t.Fatalf("openblas build gemm: status %q reason %q kind %q, want built, \"\", object", b.Status, b.Reason, b.Kind)
	}
	wantFiles := []fileResp{{"entry.o", "object"}, {"entry.c", "source"}}
	if !reflect.DeepEqual(b.Files, wantFiles) {
		t.Errorf("files = %v, want %v", b.Files, wantFiles)
	}
	if b.Entry == nil || b.Entry.Symbol != "tilepipe_entry" || !reflect.DeepEqual(b.Entry.Params, sig) {
		t.Errorf("entry = %+v, want symbol tilepipe_entry with params %v", b.Entry, sig)
	}
	if !slices.Contains(b.Link, "-lopenblas") {
		t.Errorf("link = %v, want -lopenblas among them", b.Link)
	}
	if b.Process != nil {
		t.Errorf("process = %+v, want null for an object route", b.Process)
	}
	if len(b.Commands) != 1 || b.Commands[0].Exit != 0 || !slices.Contains(b.Commands[0].Argv, "-DTP_K=5") {
		t.Errorf("commands = %+v, want one successful compile with -DTP_K=5", b.Commands)
	}
	if b.Toolchain["threads"] == nil || b.Toolchain["openblas"] == nil {
		t.Errorf("toolchain = %v, want threads and openblas keys", b.Toolchain)
	}

	syms := string(run(t, work, nil, "nm", "entry.o"))
	for _, want := range []string{"T tilepipe_entry", "U cblas_sgemm"} {
		found := false
		for _, line := range strings.Split(syms, "\n") {
			if strings.HasSuffix(strings.TrimSpace(line), want) {
				found = true
			}
		}
		if !found {
			t.Errorf("nm entry.o lacks %q:\n%s", want, syms)
		}
	}

	// Link the object as prepare would (with the route's link arguments)
	// and check it computes C = A·B.
	driver, err := filepath.Abs(filepath.Join("testdata", "gemm_driver.c"))
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"cc", "-O1", driver, "entry.o", "-o", "driver"}, b.Link...)
	run(t, work, nil, argv...)
	in := inputs(t, work, sig)
	run(t, work, []string{"OPENBLAS_NUM_THREADS=1"}, filepath.Join(work, "driver"),
		fmt.Sprint(dims["M"]), fmt.Sprint(dims["N"]), fmt.Sprint(dims["K"]), "A.bin", "B.bin", "C.bin")
	got := readF32(t, filepath.Join(work, "C.bin"), sig[2].elems())
	checkClose(t, "C", got, reference("gemm", dims, in))
}

func TestOpenBLASBuildUnsupported(t *testing.T) {
	t.Parallel()
	requireRoute(t, "openblas")
	for _, op := range []string{"add", "sum", "softmax", "rmsnorm", "layernorm"} {
		t.Run(op, func(t *testing.T) {
			dims := dimsFor(op)
			b, _ := build(t, "openblas", op, dims, signature(op, dims))
			const want = "openblas route implements only gemm (cblas_sgemm)"
			if b.Status != "unsupported" || b.Reason != want || len(b.Files) != 0 {
				t.Errorf("openblas build %s = status %q reason %q files %v, want unsupported %q and no files", op, b.Status, b.Reason, b.Files, want)
			}
		})
	}
}

func TestOpenBLASBuildSignatureMismatch(t *testing.T) {
	t.Parallel()
	requireRoute(t, "openblas")
	dims := dimsFor("gemm")
	sig := signature("gemm", dims)
	sig[1].Shape = []int{dims["N"], dims["K"]} // B transposed
	b, work := build(t, "openblas", "gemm", dims, sig)
	if b.Status != "failed" || !strings.HasPrefix(b.Reason, "signature mismatch: ") {
		t.Errorf("openblas build gemm with B transposed = status %q reason %q, want failed \"signature mismatch: ...\"", b.Status, b.Reason)
	}
	if _, err := os.Stat(filepath.Join(work, "entry.o")); err == nil {
		t.Errorf("failed build left entry.o behind")
	}
}

// visitFile writes VISIT.txt for sig with inputs under dir and outputs
// under dir/out.
func visitFile(t *testing.T, dir string, sig []param) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("tilepipe-visit 1\nwarmup_ms 1\nsample_ms 1\nsamples 3\nsingles 2\nthreads 1\n")
	for _, p := range sig {
		path := filepath.Join(dir, p.Name+".bin")
		if p.Role == "output" {
			path = filepath.Join(dir, "out", p.Name+".bin")
		}
		fmt.Fprintf(&sb, "param %s %s f32 %d %s", p.Role, p.Name, 4*p.elems(), path)
		for _, d := range p.Shape {
			fmt.Fprintf(&sb, " %d", d)
		}
		sb.WriteString("\n")
	}
	path := filepath.Join(dir, "VISIT.txt")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// visit runs the built process timer the way replay does.
func visit(t *testing.T, work string, p *processResp, visitPath string) visitResp {
	t.Helper()
	argv := append([]string{p.Interpreter, p.Script}, p.Args...)
	argv = append(argv, "--visit", visitPath)
	var v visitResp
	decode(t, "visit", run(t, work, nil, argv...), &v)
	return v
}

func checkProcessBuild(t *testing.T, op string, b buildResp) {
	t.Helper()
	if b.Status != "built" || b.Reason != "" || b.Kind != "process" {
		t.Fatalf("torch-eager build %s: status %q reason %q kind %q, want built, \"\", process", op, b.Status, b.Reason, b.Kind)
	}
	if want := []fileResp{{"wrapper.py", "wrapper"}}; !reflect.DeepEqual(b.Files, want) {
		t.Errorf("files = %v, want %v", b.Files, want)
	}
	p := b.Process
	if p == nil {
		t.Fatalf("torch-eager build %s: process is null", op)
	}
	if !filepath.IsAbs(p.Interpreter) || p.Script != "wrapper.py" || len(p.Env) != 0 {
		t.Errorf("process = %+v, want an absolute interpreter, script wrapper.py, empty env", p)
	}
	if len(p.Args) < 4 || p.Args[0] != "--op" || p.Args[1] != op || p.Args[2] != "--device" || p.Args[3] != "cpu" {
		t.Errorf("process args = %q, want them to start with --op %s --device cpu", p.Args, op)
	}
	if p.OutputPolicy != "out" && p.OutputPolicy != "copy" {
		t.Errorf("output_policy = %q, want out or copy", p.OutputPolicy)
	}
	if b.Toolchain["interpreter"] != p.Interpreter || b.Toolchain["torch"] == nil || b.Toolchain["python"] == nil {
		t.Errorf("toolchain = %v, want interpreter %s, torch and python", b.Toolchain, p.Interpreter)
	}
}

func TestTorchEagerVisit(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	for _, op := range []string{"gemm", "add", "sum", "softmax", "rmsnorm", "layernorm"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			dims := dimsFor(op)
			sig := signature(op, dims)
			b, work := build(t, "torch-eager", op, dims, sig)
			checkProcessBuild(t, op, b)
			t.Logf("torch-eager %s: output_policy %s", op, b.Process.OutputPolicy)

			dir := t.TempDir()
			in := inputs(t, dir, sig)
			v := visit(t, work, b.Process, visitFile(t, dir, sig))
			pass := map[string]string{"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}
			if v.Protocol != 1 || v.Status != "ok" || v.Reason != "" || !reflect.DeepEqual(v.Checks, pass) {
				t.Fatalf("visit %s = %+v, want ok with every check passed", op, v)
			}
			if v.CallsPerSample < 1 || len(v.BatchNs) != 3 || len(v.SingleNs) != 2 {
				t.Errorf("visit %s: calls_per_sample %d, %d batch and %d single samples; want >= 1, 3, 2", op, v.CallsPerSample, len(v.BatchNs), len(v.SingleNs))
			}
			for _, ns := range append(slices.Clone(v.BatchNs), v.SingleNs...) {
				if ns <= 0 {
					t.Errorf("visit %s: sample %d ns, want > 0", op, ns)
				}
			}
			if v.Clock != "CLOCK_MONOTONIC" || v.Threads != 1 || v.OutputPolicy != b.Process.OutputPolicy {
				t.Errorf("visit %s: clock %q threads %d output_policy %q, want CLOCK_MONOTONIC, 1, %q (build's)", op, v.Clock, v.Threads, v.OutputPolicy, b.Process.OutputPolicy)
			}
			out := sig[len(sig)-1]
			got := readF32(t, filepath.Join(dir, "out", out.Name+".bin"), out.elems())
			checkClose(t, out.Name, got, reference(op, dims, in))
		})
	}
}

func TestTorchEagerBuildRefusesTestOps(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	b, work := build(t, "torch-eager", "_mutate_input", dims, signature("add", dims))
	const want = "torch-eager route has no op '_mutate_input'"
	if b.Status != "unsupported" || b.Reason != want {
		t.Errorf("torch-eager build _mutate_input = status %q reason %q, want unsupported %q", b.Status, b.Reason, want)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("unsupported build wrote %d files", len(entries))
	}
}

// TestTorchEagerChecks feeds each visit check a violation through a
// test-only op and asserts the exact failure.
func TestTorchEagerChecks(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	sig := signature("add", dims)
	b, work := build(t, "torch-eager", "add", dims, sig)
	checkProcessBuild(t, "add", b)

	for _, tc := range []struct {
		op, reason string
		checks     map[string]string
	}{
		{"_overrun_output", "guard_overwritten: C after byte 0",
			map[string]string{"guards": "fail", "poison": "not_run", "inputs": "not_run", "repeat": "not_run"}},
		{"_skip_output", "output_not_overwritten: C element 0",
			map[string]string{"guards": "pass", "poison": "fail", "inputs": "not_run", "repeat": "not_run"}},
		{"_realloc_output", "output_reallocated: C",
			map[string]string{"guards": "pass", "poison": "fail", "inputs": "not_run", "repeat": "not_run"}},
		{"_mutate_input", "input_mutated: A byte 0",
			map[string]string{"guards": "pass", "poison": "pass", "inputs": "fail", "repeat": "not_run"}},
		{"_unrepeatable", "not_repeatable: C byte 0",
			map[string]string{"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "fail"}},
		{"_late_overrun", "guard_overwritten: C after byte 4095 (after timing)",
			map[string]string{"guards": "fail", "poison": "not_run", "inputs": "not_run", "repeat": "not_run"}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			t.Parallel()
			p := *b.Process
			p.Args = slices.Clone(p.Args)
			p.Args[1] = tc.op
			dir := t.TempDir()
			inputs(t, dir, sig)
			v := visit(t, work, &p, visitFile(t, dir, sig))
			if v.Status != "failed" || v.Reason != tc.reason || !reflect.DeepEqual(v.Checks, tc.checks) {
				t.Errorf("visit %s = status %q reason %q checks %v, want failed %q %v", tc.op, v.Status, v.Reason, v.Checks, tc.reason, tc.checks)
			}
			if v.CallsPerSample != 0 || len(v.BatchNs) != 0 || len(v.SingleNs) != 0 {
				t.Errorf("visit %s: failed visit reports timings: %+v", tc.op, v)
			}
		})
	}
}

func TestTorchEagerClosure(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	b, work := build(t, "torch-eager", "add", dims, signature("add", dims))
	checkProcessBuild(t, "add", b)
	out := strings.TrimSpace(string(run(t, work, nil, b.Process.Interpreter, b.Process.Script, "--closure")))
	paths := strings.Split(out, "\n")
	if !slices.IsSorted(paths) {
		t.Errorf("closure is not sorted")
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); !filepath.IsAbs(p) || err != nil || !fi.Mode().IsRegular() {
			t.Errorf("closure line %q is not an absolute path of a regular file (%v)", p, err)
		}
	}
	interp, err := filepath.EvalSymlinks(b.Process.Interpreter)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.EvalSymlinks(filepath.Join(work, "wrapper.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{interp, script} {
		if !slices.Contains(paths, want) {
			t.Errorf("closure lacks %s", want)
		}
	}
	if !slices.ContainsFunc(paths, func(p string) bool { return strings.Contains(filepath.Base(p), "libtorch") }) {
		t.Errorf("closure names no libtorch library:\n%s", out)
	}
}

func TestOpenBLASDescribeUnavailable(t *testing.T) {
	t.Parallel()
	var d describeResp
	out := run(t, ".", []string{"CC=/nonexistent/cc"}, routeExe(t, "openblas"), "describe")
	decode(t, "openblas describe", out, &d)
	const want = "C compiler '/nonexistent/cc' not found on PATH"
	if d.Available || d.Reason != want {
		t.Errorf("openblas describe with CC=/nonexistent/cc = available %v reason %q, want false %q", d.Available, d.Reason, want)
	}
}

// TestTorchEagerInterpreterOverride checks that $TILEPIPE_TORCH_PYTHON is
// probed before PATH, with a stand-in interpreter that answers the probe
// without importing anything.
func TestTorchEagerInterpreterOverride(t *testing.T) {
	t.Parallel()
	fake := filepath.Join(t.TempDir(), "fake-python3")
	script := `#!/bin/sh
echo '{"torch": "9.9.9+fake", "python": "3.99.0", "executable": "/fake/bin/python3", "git": "", "cuda": ""}'
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var d describeResp
	decode(t, "torch-eager describe", run(t, ".", []string{"TILEPIPE_TORCH_PYTHON=" + fake}, routeExe(t, "torch-eager"), "describe"), &d)
	const want = "torch 9.9.9+fake (Python 3.99.0, /fake/bin/python3)"
	if !d.Available || d.Version != want {
		t.Errorf("torch-eager describe with TILEPIPE_TORCH_PYTHON=%s = available %v version %q, want true %q", fake, d.Available, d.Version, want)
	}
}
