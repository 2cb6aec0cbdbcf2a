package orc_test

// These tests drive the built orc route (bin/routes/orc/route, beside the
// halide route it takes IR from) through the route protocol for real: LLVM
// 14's ORC JIT compiles Halide's IR or a test fixture, runs it once, and
// the outputs it writes are checked here in full against the oracle.
//
// The route is found at $TILEPIPE_ROUTES/orc/route (make test sets it) or
// ../../bin/routes/orc/route. Without it the tests skip, unless
// TILEPIPE_REQUIRE_ROUTES=1.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/internal/protocol"
	"github.com/tilepipe/tilepipe/oracle"
)

type file struct {
	Path  string `json:"path"`
	Role  string `json:"role"`
	Param string `json:"param,omitempty"`
}

type buildResp struct {
	Protocol int    `json:"protocol"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Kind     string `json:"kind"`
	Files    []file `json:"files"`
	Entry    *struct {
		Symbol string         `json:"symbol"`
		Params []oracle.Param `json:"params"`
	} `json:"entry"`
	Link        []string        `json:"link"`
	Process     json.RawMessage `json:"process"`
	Schedule    map[string]any  `json:"schedule"`
	Toolchain   map[string]any  `json:"toolchain"`
	Commands    []any           `json:"commands"`
	RequiresCPU []string        `json:"requires_cpu"`
}

func routesDir() string {
	if d := os.Getenv("TILEPIPE_ROUTES"); d != "" {
		return d
	}
	d, _ := filepath.Abs("../../bin/routes")
	return d
}

// route returns the orc route program, skipping (or failing, with
// TILEPIPE_REQUIRE_ROUTES=1) when it is not built or not available.
func route(t *testing.T) string {
	t.Helper()
	p := filepath.Join(routesDir(), "orc", "route")
	var reason string
	if _, err := os.Stat(p); err != nil {
		reason = "not built (make build): " + err.Error()
	} else {
		d := parseDescribe(t, runRoute(t, p, "describe"))
		if !d.Available {
			reason = d.Reason
		}
	}
	if reason != "" {
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
			t.Fatalf("orc route unavailable with TILEPIPE_REQUIRE_ROUTES=1: %s", reason)
		}
		t.Skipf("orc route unavailable: %s", reason)
	}
	return p
}

func runRoute(t *testing.T, argv ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func decode(t *testing.T, what string, out []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decode %q: %v", what, out, err)
	}
	if dec.More() {
		t.Fatalf("%s: stdout holds more than one JSON document", what)
	}
}

// job is one build: the case, its generated inputs, and optionally
// external IR.
type job struct {
	c      oracle.Case
	in     []oracle.Tensor
	ir     []string // fixture names under testdata
	abi    map[string]any
	noIn   bool // leave CASE.json's inputs out
	tmp    string
	work   string
	abiLoc string
}

func newJob(t *testing.T, op string, dims map[string]int, dtype string) *job {
	t.Helper()
	c := oracle.Case{ID: op + "-orc-test", Op: op, Dims: dims, Dtype: dtype, Pattern: "normal", Seed: 3, Policy: "strict"}
	if op == "topk" || op == "sort" {
		c.Ranking = oracle.RankingStable
	}
	in, err := oracle.Generate(c)
	if err != nil {
		t.Fatalf("Generate(%s): %v", c.ID, err)
	}
	tmp := t.TempDir()
	return &job{c: c, in: in, tmp: tmp, work: filepath.Join(tmp, "work")}
}

// build writes CASE.json (as capture does: the signature, the inputs as
// raw files) and runs the route.
func (j *job) build(t *testing.T, exe string) buildResp {
	t.Helper()
	sig, err := oracle.Signature(j.c)
	if err != nil {
		t.Fatal(err)
	}
	cj := map[string]any{
		"id": j.c.ID, "op": j.c.Op, "dims": j.c.Dims, "dtype": j.c.Dtype, "pattern": j.c.Pattern,
		"seed": j.c.Seed, "policy": j.c.Policy, "params": map[string]float64{"eps": 1e-5},
		"signature": sig, "threads": 2,
	}
	if j.c.Ranking != "" {
		cj["ranking"] = j.c.Ranking
	}
	if !j.noIn {
		var inputs []map[string]string
		k := 0
		for _, p := range sig {
			if p.Role != "input" {
				continue
			}
			path := filepath.Join(j.tmp, p.Name+".bin")
			if err := os.WriteFile(path, oracle.Encode(j.in[k]), 0o644); err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, map[string]string{"name": p.Name, "path": path})
			k++
		}
		cj["inputs"] = inputs
	}
	if j.ir != nil {
		var files []string
		for _, f := range j.ir {
			p, err := filepath.Abs(filepath.Join("testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
		js, err := json.Marshal(j.abi)
		if err != nil {
			t.Fatal(err)
		}
		j.abiLoc = filepath.Join(j.tmp, "abi.json")
		if err := os.WriteFile(j.abiLoc, js, 0o644); err != nil {
			t.Fatal(err)
		}
		cj["ir"] = map[string]any{"files": files, "abi": j.abiLoc}
	}
	js, err := json.Marshal(cj)
	if err != nil {
		t.Fatal(err)
	}
	casePath := filepath.Join(j.tmp, "case.json")
	if err := os.WriteFile(casePath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	var r buildResp
	decode(t, "build "+j.c.ID, runRoute(t, exe, "build", "--case", casePath, "--workdir", j.work), &r)
	return r
}

// outputs reads the output files of a built response in signature order.
func (j *job) outputs(t *testing.T, r buildResp) []oracle.Tensor {
	t.Helper()
	sig, _ := oracle.Signature(j.c)
	var out []oracle.Tensor
	for _, p := range sig {
		if p.Role != "output" {
			continue
		}
		var path string
		for _, f := range r.Files {
			if f.Role == "output" && f.Param == p.Name {
				path = f.Path
			}
		}
		if path == "" {
			t.Fatalf("%s: no output file for %s in %+v", j.c.ID, p.Name, r.Files)
		}
		raw, err := os.ReadFile(filepath.Join(j.work, path))
		if err != nil {
			t.Fatal(err)
		}
		tn, err := oracle.Decode(p.Dtype, raw)
		if err != nil {
			t.Fatalf("%s: decode %s: %v", j.c.ID, p.Name, err)
		}
		out = append(out, tn)
	}
	return out
}

func (j *job) check(t *testing.T, r buildResp) oracle.Verdict {
	t.Helper()
	exp, err := oracle.Reference(j.c, j.in)
	if err != nil {
		t.Fatal(err)
	}
	return oracle.Compare(j.c, exp, j.outputs(t, r))
}

func cpuFlags(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			m := map[string]bool{}
			for _, f := range strings.Fields(v) {
				m[f] = true
			}
			return m
		}
	}
	t.Fatal("/proc/cpuinfo: no flags line")
	return nil
}

func TestDescribe(t *testing.T) {
	exe := route(t)
	d := parseDescribe(t, runRoute(t, exe, "describe"))
	if d.Protocol != 1 || d.Name != "orc" || d.Kind != "object" || !d.Validates || !d.AcceptsIR {
		t.Errorf("describe = %+v, want protocol 1, name orc, kind object, validates and accepts_ir", d)
	}
	if !strings.HasPrefix(d.Version, "LLVM 14.") {
		t.Errorf("version = %q, want LLVM 14.x", d.Version)
	}
	if want := oracle.Ops(); !reflect.DeepEqual(slices.Sorted(slices.Values(d.Ops)), want) {
		t.Errorf("ops = %v, want every oracle op %v (the halide route's)", d.Ops, want)
	}
}

// TestHalideIR builds cases from Halide's IR through the JIT and checks the
// JIT run's outputs, the objects and the recorded target.
func TestHalideIR(t *testing.T) {
	exe := route(t)
	flags := cpuFlags(t)
	for _, tc := range []struct {
		op    string
		dims  map[string]int
		dtype string
	}{
		{"gemm", map[string]int{"M": 33, "N": 17, "K": 20}, "f32"},
		{"rmsnorm", map[string]int{"M": 3, "N": 37}, "bf16"},
		{"softmax", map[string]int{"M": 4, "N": 100}, "f32"},
		{"argmax", map[string]int{"M": 5, "N": 40}, "f32"},
		{"attention", map[string]int{"B": 1, "Hq": 2, "Hkv": 1, "Q": 3, "K": 9, "D": 8, "Dv": 8}, "f32"},
	} {
		t.Run(tc.op, func(t *testing.T) {
			if testing.Short() && tc.op != "gemm" {
				t.Skip("long: a Halide compile and a JIT run of seconds; make test runs every op, -short the gemm")
			}
			j := newJob(t, tc.op, tc.dims, tc.dtype)
			r := j.build(t, exe)
			if r.Status != "built" {
				t.Fatalf("status %s: %s", r.Status, r.Reason)
			}
			if v := j.check(t, r); !v.Pass {
				t.Errorf("JIT run: oracle verdict %q, want pass", v.Reason)
			}
			var objs []string
			for _, f := range r.Files {
				if f.Role == "object" {
					objs = append(objs, f.Path)
				}
			}
			if want := []string{"kernel.orc.o", "entry.orc.o"}; !reflect.DeepEqual(objs, want) {
				t.Errorf("objects = %v, want %v (Halide's module, then the entry adapter's)", objs, want)
			}
			for _, o := range objs {
				raw, err := os.ReadFile(filepath.Join(j.work, o))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(raw, []byte("\x7fELF\x02\x01\x01")) || raw[16] != 1 {
					t.Errorf("%s: not an ELF64 little-endian relocatable object", o)
				}
			}
			if r.Entry == nil || r.Entry.Symbol != "tilepipe_entry" {
				t.Errorf("entry = %+v, want tilepipe_entry", r.Entry)
			}
			for _, k := range []string{"triple", "cpu", "features", "ir_from", "clang"} {
				if r.Toolchain[k] == nil {
					t.Errorf("toolchain has no %s: %v", k, r.Toolchain)
				}
			}
			if len(r.RequiresCPU) == 0 {
				t.Error("requires_cpu is empty")
			}
			for _, f := range r.RequiresCPU {
				if !flags[f] {
					t.Errorf("requires_cpu has %q, which this CPU's /proc/cpuinfo lacks", f)
				}
			}
		})
	}
}

func addABI(symbol string) map[string]any {
	dims := map[string]int{"M": 3, "N": 7}
	return map[string]any{"symbol": symbol, "op": "add", "dims": dims, "dtype": "f32", "params": oracle.SignatureOf("add", dims, "f32")}
}

func TestExternalIR(t *testing.T) {
	exe := route(t)
	j := newJob(t, "add", map[string]int{"M": 3, "N": 7}, "f32")
	j.ir, j.abi = []string{"add.ll"}, addABI("tp_add")
	r := j.build(t, exe)
	if r.Status != "built" {
		t.Fatalf("status %s: %s", r.Status, r.Reason)
	}
	if v := j.check(t, r); !v.Pass {
		t.Errorf("JIT run: oracle verdict %q, want pass", v.Reason)
	}
	want := []file{{Path: "add.orc.o", Role: "object"}, {Path: "ir/add.ll", Role: "llvm"}, {Path: "abi.json", Role: "other"},
		{Path: "out/C.bin", Role: "output", Param: "C"}}
	if !reflect.DeepEqual(r.Files, want) {
		t.Errorf("files = %+v, want %+v", r.Files, want)
	}
	ir, err := os.ReadFile("testdata/add.ll")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(j.work, "ir/add.ll")); err != nil || !bytes.Equal(got, ir) {
		t.Errorf("ir/add.ll is not a copy of the IR that was given (%v)", err)
	}
}

// TestWrongJITRun: IR that computes the wrong thing builds, and its
// validation outputs fail the oracle (capture turns that into a failed row).
func TestWrongJITRun(t *testing.T) {
	exe := route(t)
	j := newJob(t, "add", map[string]int{"M": 3, "N": 7}, "f32")
	j.ir, j.abi = []string{"add_sub.ll"}, addABI("tp_add")
	r := j.build(t, exe)
	if r.Status != "built" {
		t.Fatalf("status %s: %s", r.Status, r.Reason)
	}
	if v := j.check(t, r); v.Pass || !strings.HasPrefix(v.Reason, "bound: C[0] = ") {
		t.Errorf("oracle verdict on A-B = %+v, want a bound failure at C[0]", v)
	}
}

func TestRejects(t *testing.T) {
	exe := route(t)
	sig := oracle.SignatureOf("add", map[string]int{"M": 3, "N": 7}, "f32")
	for _, tc := range []struct {
		name   string
		ir     string
		abi    func(map[string]any)
		noIn   bool
		status string
		reason string // WORK, ABI and CASE stand for the test's paths
	}{
		{"symbol missing", "add.ll", func(a map[string]any) { a["symbol"] = "tp_add2" }, false, "failed",
			"abi: entry tp_add2 is not defined by the IR (WORK/ir/add.ll)"},
		{"entry type", "add_void.ll", nil, false, "failed",
			"abi: entry tp_add in WORK/ir/add_void.ll has type void (i8**), want i32 (ptr): int tp_add(void *const *buffers)"},
		{"two definitions", "add.ll,add_again.ll", nil, false, "failed",
			"abi: entry tp_add is defined by 2 IR modules (WORK/ir/add.ll, WORK/ir/add_again.ll), want exactly 1"},
		{"unreached module", "add.ll,unused.ll", nil, false, "failed",
			"JIT: module unused was not compiled by the entry's lookup (no symbol of it is reachable from tp_add); pass only the IR the entry needs"},
		{"internal entry", "add_internal.ll", nil, false, "failed",
			"abi: entry tp_add in WORK/ir/add_internal.ll has type i32 (i8**) (not external), want i32 (ptr): int tp_add(void *const *buffers)"},
		{"params", "add.ll", func(a map[string]any) { a["params"] = sig[:2] }, false, "failed",
			"abi ABI: params " + routeJSON(sig[:2]) + " differ from the case signature " + routeJSON(sig)},
		{"other case", "add.ll", func(a map[string]any) { a["dims"] = map[string]int{"M": 3, "N": 8} }, false, "unsupported",
			`the external IR (ABI) implements add {"M": 3, "N": 8} f32, not this case`},
		{"no inputs", "add.ll", nil, true, "failed",
			"case CASE: inputs: no file for input A (the orc route runs its JIT once and needs every input)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, "add", map[string]int{"M": 3, "N": 7}, "f32")
			j.ir, j.abi, j.noIn = strings.Split(tc.ir, ","), addABI("tp_add"), tc.noIn
			if tc.abi != nil {
				tc.abi(j.abi)
			}
			r := j.build(t, exe)
			want := strings.NewReplacer("WORK", j.work, "ABI", j.abiLoc, "CASE", filepath.Join(j.tmp, "case.json")).Replace(tc.reason)
			if r.Status != tc.status || r.Reason != want {
				t.Errorf("build = %s %q,\nwant %s %q", r.Status, r.Reason, tc.status, want)
			}
			for _, f := range r.Files {
				if f.Role == "object" {
					t.Errorf("a rejected build lists object %s", f.Path)
				}
			}
		})
	}
}

// routeJSON is v as the route's JSON writer spells it (", " and ": ").
func routeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return strings.NewReplacer(`":`, `": `, `,`, `, `).Replace(string(b))
}

// parseDescribe parses the route's describe answer with capture's own
// parser.
func parseDescribe(t *testing.T, out []byte) protocol.Description {
	t.Helper()
	d, err := protocol.ParseDescription(out)
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	return d
}
