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
// checks; describe never offers them and build answers unsupported. A test
// selects one by replacing the op after --op in the built process's args.
//
// Visits speak protocol 3 (docs/protocol.md, "visit (timers)"):
// the tests make the memory files replay makes (sealed inputs of 3 warm
// and 2 fresh buffer sets, each set's inputs different, and output files
// read back after the visit) and start the wrapper through internal/visit,
// as replay does without a sandbox: validation, replay's samples
// (visit.Session.Drive), a novel sample of every fresh set taken of the
// frozen visit (visit protocol 4; where this machine gives no cgroup
// freezer, the visit takes the warm samples alone), the final report.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/protocol"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/prepare/harness"
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

// describeResp is a route's describe answer, parsed and checked as
// capture parses it.
type describeResp = protocol.Description

// parseDescribe parses a describe answer with capture's own parser.
func parseDescribe(t *testing.T, what string, out []byte) describeResp {
	t.Helper()
	d, err := protocol.ParseDescription(out)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return d
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
	ClosureArgs  []string          `json:"closure_args"`
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
	Link        []string          `json:"link"`
	Process     *processResp      `json:"process"`
	Toolchain   map[string]any    `json:"toolchain"`
	Commands    []commandResp     `json:"commands"`
	Schedule    json.RawMessage   `json:"schedule"`
	Env         map[string]string `json:"env"`
	RequiresCPU []string          `json:"requires_cpu"`
}

type commandResp struct {
	Argv []string `json:"argv"`
	Exit int      `json:"exit"`
}

// signature is the protocol's tensor list for op with f32 storage
// (docs/protocol.md).
func signature(op string, dims map[string]int) []param { return signatureF(op, dims, "f32") }

// signatureF is op's tensor list with float tensors stored in f: exactly
// what capture sends a route (oracle.SignatureOf, docs/protocol.md).
func signatureF(op string, dims map[string]int, f string) []param {
	var out []param
	for _, p := range oracle.SignatureOf(op, dims, f) {
		out = append(out, param(p))
	}
	return out
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
	cmd.Env = commandEnv(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// commandEnv is a test command's whole environment: what capture passes
// every command it runs from the user's (PATH, HOME and the locale, as
// artifacts.Env does) and env. The user's OpenBLAS variables, which
// capture would pass on too, are left out: what a route does with a core
// type in the environment is each test's to set (TestTorchEagerCoreType
// sets one), so no test depends on what this machine's user set.
func commandEnv(env []string) []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return append(out, env...)
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

// buildCaches are the --cache directories of routes that describe a build
// cache, one per route and environment, as one capture shares one among
// its builds of a route: the tests' builds probe the machine once.
// TestTorchEagerBuildCache checks that a cached build answers as a fresh one.
var buildCaches struct {
	sync.Mutex
	dirs map[string]string
}

func buildCache(t *testing.T, route string, env []string) string {
	t.Helper()
	buildCaches.Lock()
	defer buildCaches.Unlock()
	key := route + "\x00" + strings.Join(env, "\x00")
	if d, ok := buildCaches.dirs[key]; ok {
		return d
	}
	d, err := os.MkdirTemp("", "tilepipe-route-cache-")
	if err != nil {
		t.Fatal(err)
	}
	if buildCaches.dirs == nil {
		buildCaches.dirs = map[string]string{}
	}
	buildCaches.dirs[key] = d
	return d
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range buildCaches.dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func describe(t *testing.T, name string) describeResp {
	t.Helper()
	if d, ok := describeCache.Load(name); ok {
		return d.(describeResp)
	}
	d := parseDescribe(t, name+" describe", run(t, ".", nil, routeExe(t, name), "describe"))
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
	return buildCase(t, route, op, dims, sig, "f32", "")
}

// buildCase is build with a storage dtype and a ranking contract ("" for
// none).
func buildCase(t *testing.T, route, op string, dims map[string]int, sig []param, dtype, ranking string) (buildResp, string) {
	t.Helper()
	return buildCaseEnv(t, route, op, dims, sig, dtype, ranking, nil)
}

// buildCaseEnv is buildCase with KEY=VALUE variables added to the route's
// environment.
func buildCaseEnv(t *testing.T, route, op string, dims map[string]int, sig []param, dtype, ranking string, env []string) (buildResp, string) {
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
		"id": id, "op": op, "dims": dims, "dtype": dtype, "pattern": "normal",
		"seed": 1, "policy": "strict", "params": map[string]float64{"eps": eps},
		"signature": sig, "threads": 1,
	}
	if ranking != "" {
		c["ranking"] = ranking
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
	argv := []string{routeExe(t, route), "build", "--case", casePath, "--workdir", work}
	if describe(t, route).BuildCache {
		argv = append(argv, "--cache", buildCache(t, route, env))
	}
	out := run(t, tmp, env, argv...)
	decode(t, route+" build "+op, out, &b)
	if b.Protocol != 1 {
		t.Errorf("%s build %s: protocol = %d, want 1", route, op, b.Protocol)
	}
	return b, work
}

// tensors holds tensor values by name, as float64 (i64 values are small
// and exact).
type tensors map[string][]float64

// dyadic is a deterministic input in [-1.5625, 1.5625], exact in f16 and
// bf16; salt (below 101) keeps tensors and buffer sets apart.
func dyadic(n, salt int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64((i*37+salt*11+5)%101-50) / 32
	}
	return x
}

// ties draws from {-1, -0.5, ±0, 0.5, 1} with both signed zeros, for the
// selection ops; row 0 has no positive value, so its maximum is a zero.
// salt shifts the pattern (a buffer set's inputs differ from another's).
func ties(n, cols, salt int) []float64 {
	x := make([]float64, n)
	for i := range x {
		v := float64(((i+salt)*7)%5-2) / 2
		if i < cols {
			v = -math.Abs(v)
		}
		if v == 0 && i%2 == 1 {
			v = math.Copysign(0, -1)
		}
		x[i] = v
	}
	return x
}

// ragged has full-mantissa values across six decades, so an FP32 left fold
// rounds at almost every step (and a double accumulator would differ);
// salt shifts the phase.
func ragged(n, salt int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(float32(math.Sin(float64(i)*0.7+1+float64(salt)*0.3) * []float64{1e-3, 1, 1e3}[i%3]))
	}
	return x
}

// inputValues picks the inputs of op's tensor p (the route never chooses
// them); salt keeps tensors and buffer sets apart.
func inputValues(op string, dims map[string]int, p param, salt int) []float64 {
	n := p.elems()
	switch {
	case op == "embedding" && p.Name == "I":
		x := make([]float64, n)
		for i := range x {
			x[i] = float64((i*5 + 1 + salt) % dims["V"])
		}
		return x
	case op == "cross_entropy" && p.Name == "T":
		x := make([]float64, n)
		for i := range x {
			x[i] = float64((i*3 + salt) % dims["N"])
		}
		return x
	case slices.Contains([]string{"argmax", "max", "topk", "sort"}, op):
		return ties(n, dims["N"], salt)
	case op == "scan_ordered":
		return ragged(n, salt)
	}
	return dyadic(n, salt)
}

func f16bits(v float64) uint16 {
	b := math.Float32bits(float32(v))
	sign, exp, man := uint16(b>>16)&0x8000, int(b>>23&0xff)-127, b&0x7fffff
	if v == 0 {
		return sign
	}
	if exp < -14 || exp > 15 || man&0x1fff != 0 {
		panic(fmt.Sprintf("%g is not a normal f16 value", v))
	}
	return sign | uint16(exp+15)<<10 | uint16(man>>13)
}

func f16value(h uint16) float64 {
	s, e, m := 1.0, int(h>>10&0x1f), float64(h&0x3ff)
	if h&0x8000 != 0 {
		s = -1
	}
	switch e {
	case 0:
		return s * m * math.Ldexp(1, -24)
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return s * math.Inf(1)
	}
	return s * (1 + m/1024) * math.Ldexp(1, e-15)
}

// encode stores x in dtype, little-endian; f16 and bf16 values must be
// exact.
func encode(dtype string, x []float64) []byte {
	var b []byte
	for _, v := range x {
		switch dtype {
		case "f32":
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case "i64":
			b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
		case "bf16":
			u := math.Float32bits(float32(v))
			if u&0xffff != 0 {
				panic(fmt.Sprintf("%g is not a bf16 value", v))
			}
			b = binary.LittleEndian.AppendUint16(b, uint16(u>>16))
		case "f16":
			b = binary.LittleEndian.AppendUint16(b, f16bits(v))
		}
	}
	return b
}

// decode reads dtype elements as float64 (bits for f32 and i64 kept in
// raw, so -0 and exact indices can be compared).
func decodeValues(dtype string, b []byte) (vals []float64, raw []uint64) {
	size := map[string]int{"f32": 4, "i64": 8, "f16": 2, "bf16": 2}[dtype]
	for i := 0; i+size <= len(b); i += size {
		switch dtype {
		case "f32":
			u := binary.LittleEndian.Uint32(b[i:])
			vals, raw = append(vals, float64(math.Float32frombits(u))), append(raw, uint64(u))
		case "i64":
			u := binary.LittleEndian.Uint64(b[i:])
			vals, raw = append(vals, float64(int64(u))), append(raw, u)
		case "bf16":
			u := binary.LittleEndian.Uint16(b[i:])
			vals, raw = append(vals, float64(math.Float32frombits(uint32(u)<<16))), append(raw, uint64(u))
		case "f16":
			u := binary.LittleEndian.Uint16(b[i:])
			vals, raw = append(vals, f16value(u)), append(raw, uint64(u))
		}
	}
	return vals, raw
}

// inputs writes every input of sig under dir as NAME.bin (for a driver
// that reads files, as the openblas test's does) and returns them by name.
func inputs(t *testing.T, dir, op string, dims map[string]int, sig []param) tensors {
	t.Helper()
	in := tensors{}
	for i, p := range sig {
		if p.Role != "input" {
			continue
		}
		in[p.Name] = inputValues(op, dims, p, i)
		if err := os.WriteFile(filepath.Join(dir, p.Name+".bin"), encode(p.Dtype, in[p.Name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

func gelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func geluGrad(x float64) float64 {
	k := math.Sqrt(2 / math.Pi)
	th := math.Tanh(k * (x + 0.044715*x*x*x))
	return 0.5*(1+th) + 0.5*x*(1-th*th)*k*(1+3*0.044715*x*x)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// rank is the stable ranking of one row: indices ordered by value
// (descending or ascending), ties in index order, ±0 tied.
func rank(row []float64, desc bool) []int {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		if desc {
			return row[idx[a]] > row[idx[b]]
		}
		return row[idx[a]] < row[idx[b]]
	})
	return idx
}

// reference computes op's outputs by name in float64 from the stored
// inputs. Selection outputs (V, I) and scan_ordered are exact: V holds
// f32 bits, scan_ordered is the FP32 left fold.
func reference(op string, dims map[string]int, in tensors) tensors {
	M, N, K := dims["M"], dims["N"], dims["K"]
	out := tensors{}
	mk := func(name string, n int) []float64 { out[name] = make([]float64, n); return out[name] }
	matmul := func(y, a, b []float64, M, N, K int) {
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				var s float64
				for k := 0; k < K; k++ {
					s += a[i*K+k] * b[k*N+j]
				}
				y[i*N+j] = s
			}
		}
	}
	switch op {
	case "gemm", "gemm_relu", "gemm_gelu":
		y := mk("C", M*N)
		matmul(y, in["A"], in["B"], M, N, K)
		for i, v := range y {
			switch op {
			case "gemm_relu":
				y[i] = math.Max(0, 0.125*v+0.25)
			case "gemm_gelu":
				y[i] = gelu(0.125*v + 0.25)
			}
		}
	case "bmm":
		B := dims["B"]
		y := mk("C", B*M*N)
		for b := 0; b < B; b++ {
			matmul(y[b*M*N:], in["A"][b*M*K:], in["B"][b*K*N:], M, N, K)
		}
	case "gemv":
		matmul(mk("Y", M), in["A"], in["X"], M, 1, K)
	case "embedding":
		D := dims["D"]
		y := mk("Y", M*D)
		for i, id := range in["I"] {
			copy(y[i*D:(i+1)*D], in["E"][int(id)*D:])
		}
	case "attention":
		attention(mk("O", len(in["Q"])/dims["D"]*dims["Dv"]), dims, in)
	case "rope":
		R := dims["R"]
		y := mk("Y", M*N)
		for m := 0; m < M; m++ {
			x := in["X"][m*N : (m+1)*N]
			copy(y[m*N:(m+1)*N], x)
			for i := 0; i < R/2; i++ {
				c, s := in["COS"][m*R/2+i], in["SIN"][m*R/2+i]
				y[m*N+2*i] = x[2*i]*c - x[2*i+1]*s
				y[m*N+2*i+1] = x[2*i]*s + x[2*i+1]*c
			}
		}
	default:
		// Element-wise and row-wise ops on [M, N].
		for m := 0; m < M; m++ {
			rowOp(op, m, N, K, in, out)
		}
	}
	return out
}

// rowOp computes row m of an element-wise or row-wise op into out.
func rowOp(op string, m, N, K int, in, out tensors) {
	M := len(in[firstIn(op)]) / N
	at := func(name string, n int) []float64 {
		if out[name] == nil {
			out[name] = make([]float64, M*n)
		}
		return out[name][m*n : (m+1)*n]
	}
	row := func(name string) []float64 { return in[name][m*N : (m+1)*N] }
	switch op {
	case "add", "gelu_add":
		a, b, c := row("A"), row("B"), at("C", N)
		for j := range c {
			c[j] = a[j] + b[j]
			if op == "gelu_add" {
				c[j] = gelu(c[j])
			}
		}
	case "sigmoid_pair", "gelu_pair":
		x, y, d := row("X"), at("Y", N), at("D", N)
		for j := range x {
			if op == "sigmoid_pair" {
				y[j], d[j] = sigmoid(x[j]), sigmoid(x[j])*(1-sigmoid(x[j]))
			} else {
				y[j], d[j] = gelu(x[j]), geluGrad(x[j])
			}
		}
	case "swiglu":
		g, u, y := row("G"), row("U"), at("Y", N)
		for j := range y {
			y[j] = g[j] * sigmoid(g[j]) * u[j]
		}
	case "sum", "max":
		x, y := row("X"), at("Y", 1)
		y[0] = x[0]
		for _, v := range x[1:] {
			if op == "sum" {
				y[0] += v
			} else if v > y[0] {
				y[0] = v
			}
		}
	case "softmax", "cross_entropy":
		x, mx, s := row("X"), math.Inf(-1), 0.0
		for _, v := range x {
			mx = math.Max(mx, v)
		}
		for _, v := range x {
			s += math.Exp(v - mx)
		}
		if op == "cross_entropy" {
			at("L", 1)[0] = mx + math.Log(s) - x[int(in["T"][m])]
			return
		}
		y := at("Y", N)
		for j, v := range x {
			y[j] = math.Exp(v-mx) / s
		}
	case "rmsnorm":
		x, y := row("X"), at("Y", N)
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(N)+eps)
		for j, v := range x {
			y[j] = v * r * in["W"][j]
		}
	case "layernorm", "residual_layernorm":
		x := row("X")
		if op == "residual_layernorm" {
			h := at("H", N)
			for j, r := range row("R") {
				h[j] = x[j] + r
			}
			x = h
		}
		y := at("Y", N)
		var mean, v float64
		for _, e := range x {
			mean += e
		}
		mean /= float64(N)
		for _, e := range x {
			v += (e - mean) * (e - mean)
		}
		r := 1 / math.Sqrt(v/float64(N)+eps)
		for j, e := range x {
			y[j] = (e-mean)*r*in["W"][j] + in["B"][j]
		}
	case "scan_ordered", "scan":
		x, y := row("X"), at("Y", N)
		var s32 float32
		var s64 float64
		for j, v := range x {
			s32 += float32(v)
			s64 += v
			y[j] = s64
			if op == "scan_ordered" {
				y[j] = float64(s32)
			}
		}
	case "argmax", "topk", "sort":
		x := row("X")
		n := N
		switch op {
		case "argmax":
			n = 1
		case "topk":
			n = K
		}
		idx := rank(x, op != "sort")[:n]
		v, i := at("V", n), at("I", n)
		for j, k := range idx {
			v[j], i[j] = x[k], float64(k)
		}
	}
}

func firstIn(op string) string {
	switch op {
	case "add", "gelu_add":
		return "A"
	case "swiglu":
		return "G"
	}
	return "X"
}

// attention is the causal GQA reference with the bottom-right mask.
func attention(o []float64, dims map[string]int, in tensors) {
	B, Hq, Hkv, Q, K, D, Dv := dims["B"], dims["Hq"], dims["Hkv"], dims["Q"], dims["K"], dims["D"], dims["Dv"]
	for b := 0; b < B; b++ {
		for h := 0; h < Hq; h++ {
			kv := b*Hkv + h/(Hq/Hkv)
			for q := 0; q < Q; q++ {
				qv := in["Q"][((b*Hq+h)*Q+q)*D:]
				s := make([]float64, q+K-Q+1)
				mx := math.Inf(-1)
				for k := range s {
					for d := 0; d < D; d++ {
						s[k] += qv[d] * in["K"][(kv*K+k)*D+d]
					}
					s[k] /= math.Sqrt(float64(D))
					mx = math.Max(mx, s[k])
				}
				var z float64
				for k := range s {
					s[k] = math.Exp(s[k] - mx)
					z += s[k]
				}
				ov := o[((b*Hq+h)*Q+q)*Dv:]
				for d := 0; d < Dv; d++ {
					for k := range s {
						ov[d] += s[k] / z * in["V"][(kv*K+k)*Dv+d]
					}
				}
			}
		}
	}
}

// tolerance is the relative error allowed for a storage dtype, relative
// to max(|want|, 1): several roundings of the storage format.
func tolerance(dtype string) float64 {
	switch dtype {
	case "bf16":
		return 1.0 / 32
	case "f16":
		return 1.0 / 256
	}
	return 1e-4
}

// checkClose compares got with want at tol relative to max(|want|, 1);
// the inputs are O(1), so the floor only matters near zero.
func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	bad := 0
	for i := range want {
		if !(math.Abs(got[i]-want[i]) <= tol*math.Max(math.Abs(want[i]), 1)) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements outside tolerance", what, bad, len(want))
	}
}

// checkExact compares f32 or i64 bits.
func checkExact(t *testing.T, what string, raw []uint64, want []float64, dtype string) {
	t.Helper()
	bad := 0
	for i, w := range want {
		wb := uint64(int64(w))
		if dtype == "f32" {
			wb = uint64(math.Float32bits(float32(w)))
		}
		if raw[i] != wb {
			if bad < 5 {
				t.Errorf("%s[%d] bits %#x, want %#x (%g)", what, i, raw[i], wb, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(want))
	}
}

// checkStandard checks a `standard` ranking of rows of width n over X of
// width N: values equal the stable ranking's values (as numbers: ±0
// tie), indices are unique, in range, and hold their value's bits.
func checkStandard(t *testing.T, op string, x []float64, v []float64, vraw []uint64, idx, wantV []float64, N, n int) {
	t.Helper()
	for m := 0; m < len(x)/N; m++ {
		seen := map[int]bool{}
		for j := 0; j < n; j++ {
			i := int(idx[m*n+j])
			ok := v[m*n+j] == wantV[m*n+j] && i >= 0 && i < N && !seen[i] &&
				uint64(math.Float32bits(float32(x[m*N+i]))) == vraw[m*n+j]
			if !ok {
				t.Errorf("%s row %d position %d: V=%g I=%d, want value %g at a fresh index holding it", op, m, j, v[m*n+j], i, wantV[m*n+j])
				return
			}
			seen[i] = true
		}
	}
}

func TestDescribe(t *testing.T) {
	allOps := []string{"gemm", "gemm_relu", "gemm_gelu", "bmm", "gemv", "add", "gelu_add",
		"sigmoid_pair", "gelu_pair", "swiglu", "rope", "sum", "max", "softmax",
		"rmsnorm", "layernorm", "residual_layernorm", "cross_entropy",
		"scan_ordered", "scan", "argmax", "topk", "sort", "embedding", "attention"}
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
	in := inputs(t, work, "gemm", dims, sig)
	run(t, work, []string{"OPENBLAS_NUM_THREADS=1"}, filepath.Join(work, "driver"),
		fmt.Sprint(dims["M"]), fmt.Sprint(dims["N"]), fmt.Sprint(dims["K"]), "A.bin", "B.bin", "C.bin")
	b2, err := os.ReadFile(filepath.Join(work, "C.bin"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := decodeValues("f32", b2)
	if len(got) != sig[2].elems() {
		t.Fatalf("C.bin: %d values, want %d", len(got), sig[2].elems())
	}
	checkClose(t, "C", got, reference("gemm", dims, in)["C"], tolerance("f32"))
}

// TestOpenBLASCoreType: the baseline runs the widest kernels its CPU
// allows (issue 12). coretype_test.py checks the choice on recorded
// machines and, with this machine's library, that the core it would set is
// the one the library then reports; the build here records the core and
// why, and sets OPENBLAS_CORETYPE (with the flags that justify it as
// requires_cpu) only where the library's own pick is narrower.
func TestOpenBLASCoreType(t *testing.T) {
	t.Parallel()
	requireRoute(t, "openblas")
	cmd := exec.Command("/usr/bin/python3", filepath.Join("openblas", "coretype_test.py"))
	cmd.Env = commandEnv(nil)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !bytes.Contains(out, []byte("\nall passed\n")) {
		t.Fatalf("coretype_test.py: %v", err)
	}
	dims := dimsFor("gemm")
	b, _ := build(t, "openblas", "gemm", dims, signature("gemm", dims))
	var sched struct {
		Core string `json:"openblas_core"`
		Why  string `json:"openblas_core_why"`
	}
	if err := json.Unmarshal(b.Schedule, &sched); err != nil || sched.Core == "" || sched.Why == "" {
		t.Fatalf("schedule %s: want openblas_core and openblas_core_why (%v)", b.Schedule, err)
	}
	set := b.Env["OPENBLAS_CORETYPE"]
	switch {
	case set != "" && (set != sched.Core || len(b.RequiresCPU) == 0 || !strings.Contains(sched.Why, "allow "+set)):
		t.Errorf("env %v requires_cpu %v schedule %+v: a core set must be the one recorded, with the flags that justify it", b.Env, b.RequiresCPU, sched)
	case set == "" && len(b.Env)+len(b.RequiresCPU) > 0:
		t.Errorf("env %v requires_cpu %v with no core set", b.Env, b.RequiresCPU)
	}
	t.Logf("this machine: core %s (%s), env %v", sched.Core, sched.Why, b.Env)
	// A core type the user set is kept, recorded and passed to the visits,
	// with the flags its kernels need.
	b, _ = buildCaseEnv(t, "openblas", "gemm", dims, signature("gemm", dims), "f32", "", []string{"OPENBLAS_CORETYPE=Haswell"})
	if err := json.Unmarshal(b.Schedule, &sched); err != nil {
		t.Fatal(err)
	}
	if b.Env["OPENBLAS_CORETYPE"] != "Haswell" || sched.Why != "OPENBLAS_CORETYPE=Haswell is set in the environment: kept" || !slices.Equal(b.RequiresCPU, []string{"avx2", "fma"}) {
		t.Errorf("kept: env %v schedule %+v requires %v; want Haswell passed on, said kept, requiring avx2 fma", b.Env, sched, b.RequiresCPU)
	}
}

// TestTorchEagerCoreType: torch's CPU matrix ops run on the OpenBLAS
// Debian links it with, so the torch-eager route chooses the core type by
// the openblas route's rule and confirms it with the library before it
// sets it for the visits (process env); a core type already in the
// environment is kept and passed on, with the flags its kernels need;
// ops that make no BLAS call set nothing.
func TestTorchEagerCoreType(t *testing.T) {
	if testing.Short() {
		t.Skip("long: torch processes of seconds each; make test runs it")
	}
	t.Parallel()
	requireRoute(t, "torch-eager")
	type sched struct {
		BLAS string `json:"blas"`
		Core string `json:"openblas_core"`
		Why  string `json:"openblas_core_why"`
	}
	dims := dimsFor("gemm")
	for _, tc := range []struct {
		name string
		env  []string
	}{{"this machine", nil}, {"kept", []string{"OPENBLAS_CORETYPE=Haswell"}}} {
		b, _ := buildCaseEnv(t, "torch-eager", "gemm", dims, signature("gemm", dims), "f32", "", tc.env)
		var s sched
		if err := json.Unmarshal(b.Schedule, &s); err != nil || b.Process == nil {
			t.Fatalf("%s: schedule %s process %v: %v", tc.name, b.Schedule, b.Process, err)
		}
		if strings.HasPrefix(s.BLAS, "not OpenBLAS") {
			t.Skipf("torch here does not load OpenBLAS: %s", s.BLAS)
		}
		set := b.Process.Env["OPENBLAS_CORETYPE"]
		t.Logf("%s: core %s (%s), env %v, requires %v", tc.name, s.Core, s.Why, b.Process.Env, b.RequiresCPU)
		switch {
		case tc.env != nil && (set != "Haswell" || s.Why != "OPENBLAS_CORETYPE=Haswell is set in the environment: kept" || !slices.Equal(b.RequiresCPU, []string{"avx2", "fma"})):
			t.Errorf("kept: env %v why %q requires %v; want Haswell passed on, said kept, requiring avx2 fma", b.Process.Env, s.Why, b.RequiresCPU)
		case tc.env == nil && set != "" && (set != s.Core || len(b.RequiresCPU) == 0 || !strings.Contains(s.Why, "allow "+set)):
			t.Errorf("env %v requires_cpu %v schedule %+v: a core set must be the one recorded, with the flags that justify it", b.Process.Env, b.RequiresCPU, s)
		case tc.env == nil && set == "" && (len(b.RequiresCPU) > 0 || s.Core == "" || s.Why == ""):
			t.Errorf("env %v requires_cpu %v schedule %+v: with no core set, want the library's core and why, no requirement", b.Process.Env, b.RequiresCPU, s)
		}
	}
	dims = dimsFor("add")
	b, _ := build(t, "torch-eager", "add", dims, signature("add", dims))
	if b.Process == nil || len(b.Process.Env) != 0 || strings.Contains(string(b.Schedule), "openblas") {
		t.Errorf("add: process %+v schedule %s; want no core type (no BLAS call)", b.Process, b.Schedule)
	}
}

// TestTorchEagerBuildCache: a build that finds the probes in its --cache
// (what the first build of a capture left) answers byte for byte as a
// build that probed torch itself, for an op with a BLAS core type and one
// without; the cache holds the probes and nothing of the case.
func TestTorchEagerBuildCache(t *testing.T) {
	if testing.Short() {
		t.Skip("long: torch processes of seconds each; make test runs it")
	}
	t.Parallel()
	requireRoute(t, "torch-eager")
	cache := t.TempDir()
	for _, op := range []string{"gemm", "add"} {
		dims := dimsFor(op)
		_, work := build(t, "torch-eager", op, dims, signature(op, dims)) // for its case file
		casePath := filepath.Join(filepath.Dir(work), "case.json")
		answer := func(extra ...string) []byte {
			w := t.TempDir()
			return run(t, w, nil, append([]string{routeExe(t, "torch-eager"), "build", "--case", casePath, "--workdir", w}, extra...)...)
		}
		fresh, first, second := answer(), answer("--cache", cache), answer("--cache", cache)
		if !bytes.Equal(fresh, first) || !bytes.Equal(fresh, second) {
			t.Errorf("%s: build without a cache\n%s\nwith an empty one\n%s\nwith a full one\n%s", op, fresh, first, second)
		}
	}
	ents, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "blas-"+names[0][5:21]+"-own.json" || names[1] != "torch-cpu.json" {
		t.Errorf("cache holds %q, want the BLAS probe and the torch probe", names)
	}
}

// TestTorchEagerBuildCacheTemp: a build writing a probe into the shared
// --cache never touches a name another build of the same capture may be
// writing. Capture runs every build in a PID namespace of its own, where
// each build's pid is 2, so the temporary once named by pid
// (torch-cpu.json.2.tmp) was every concurrent build's: on the H200, 12
// builds at once, one build's rename took the other's file and that build
// failed with ENOENT. Here the other build's temporary is planted at that
// name and the build runs as pid 2 (bwrap --unshare-pid): the planted file
// must be left as it was, and the cache must hold the probe.
func TestTorchEagerBuildCacheTemp(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a torch process of seconds; make test runs it")
	}
	t.Parallel()
	requireRoute(t, "torch-eager")
	bwrap, err := exec.LookPath("bwrap")
	if err == nil {
		err = exec.Command(bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--", "true").Run()
	}
	if err != nil { // capture's sandbox needs the same (visit.Probe)
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") != "" {
			t.Fatalf("bwrap --unshare-pid: %v, and TILEPIPE_REQUIRE_ROUTES is set (make test)", err)
		}
		t.Skipf("bwrap --unshare-pid: %v (make deps installs bwrap)", err)
	}
	dims := dimsFor("add")
	_, work := build(t, "torch-eager", "add", dims, signature("add", dims))
	casePath := filepath.Join(filepath.Dir(work), "case.json")
	cache := t.TempDir()
	other := filepath.Join(cache, "torch-cpu.json.2.tmp")
	const planted = `{"another build": "still writing"}`
	if err := os.WriteFile(other, []byte(planted), 0o644); err != nil {
		t.Fatal(err)
	}
	w := t.TempDir()
	pid := run(t, w, nil, bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--", "sh", "-c", "echo $$")
	if strings.TrimSpace(string(pid)) != "2" {
		t.Fatalf("a process under bwrap --unshare-pid has pid %q, want 2 (the build sandbox's)", pid)
	}
	run(t, w, nil, bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--",
		routeExe(t, "torch-eager"), "build", "--case", casePath, "--workdir", w, "--cache", cache)
	got, err := os.ReadFile(other)
	if err != nil || string(got) != planted {
		t.Errorf("another build's temporary %s after the build: %q, %v; want it untouched", other, got, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "torch-cpu.json")); err != nil {
		t.Errorf("cache after the build: %v; want torch-cpu.json", err)
	}
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

// Buffer sets of every test visit (docs/protocol.md, "Buffer sets and
// memory files"): the warm sets the timed samples rotate over, each
// validated, and the fresh sets (the novel slots), which runVisit's novel
// sample calls every one of.
const (
	warmSets  = 3
	freshSets = 2
)

// pools are the visit's pools in the visit file's order.
var pools = []string{visit.PoolWarm, visit.PoolFresh}

func poolSets(pool string) int {
	if pool == visit.PoolWarm {
		return warmSets
	}
	return freshSets
}

var dtypeSize = map[string]int{"f32": 4, "i64": 8, "f16": 2, "bf16": 2}

// bytes is one buffer of p.
func (p param) bytes() int { return dtypeSize[p.Dtype] * p.elems() }

// fillDraw is the draw of every test visit's fill pattern
// (visit.FillPattern): what replay writes over the outputs before the
// timed samples, so a timed call that writes nothing is seen.
const fillDraw = 0x5eed5eed

// visitCase is one visit of protocol 3: the inputs of every buffer set,
// the memory files replay hands over and VISIT.txt naming them.
type visitCase struct {
	op   string
	dims map[string]int
	sig  []param
	in   map[string][]tensors // pool -> set -> input values; every set's differ
	mem  []*visit.MemFile     // per param of sig, its warm file then its fresh file: fd 5, 6, 7, ...
	path string               // VISIT.txt
	// What runVisit's sampler read when validation passed, by output
	// name and set: the warm outputs right after the validated report, and
	// the fresh outputs right after the novel sample's answer.
	validated, fresh map[string][][]byte
	// novel: runVisit ran the visit under a cgroup freezer, so its
	// sampler takes the novel sample ([freezer]).
	novel bool
}

// newVisitCase draws the inputs of every warm and fresh set of op (edit,
// when not nil, may change them), puts them in sealed memory files, makes
// an output file per pool, and writes VISIT.txt.
func newVisitCase(t *testing.T, op string, dims map[string]int, sig []param, edit func(in map[string][]tensors)) *visitCase {
	t.Helper()
	vc := &visitCase{op: op, dims: dims, sig: sig, in: map[string][]tensors{}}
	g := 0 // sets of both pools, counted: no two sets get the same inputs
	for _, pool := range pools {
		for range poolSets(pool) {
			in := tensors{}
			for i, p := range sig {
				if p.Role == "input" {
					in[p.Name] = inputValues(op, dims, p, i+len(sig)*g)
				}
			}
			vc.in[pool] = append(vc.in[pool], in)
			g++
		}
	}
	if edit != nil {
		edit(vc.in)
	}
	t.Cleanup(func() {
		for _, m := range vc.mem {
			m.Close()
		}
	})
	for _, p := range sig {
		for _, pool := range pools {
			l := visit.NewLayout(pool, poolSets(pool), p.bytes())
			var m *visit.MemFile
			var err error
			if p.Role == "input" {
				var raw [][]byte
				for _, in := range vc.in[pool] {
					raw = append(raw, encode(p.Dtype, in[p.Name]))
				}
				m, err = visit.NewInput(p.Name, l, raw)
			} else {
				m, err = visit.NewOutput(p.Name, l)
			}
			if err != nil {
				t.Fatal(err)
			}
			vc.mem = append(vc.mem, m)
		}
	}
	vc.path = filepath.Join(t.TempDir(), "VISIT.txt")
	vc.write(t, vc.text())
	return vc
}

// text is the well-formed VISIT.txt (protocol 3) of vc, as replay writes
// it (replay.VisitFile): one thread, both pools, then one line per param
// of sig naming its warm and fresh memory files.
func (vc *visitCase) text() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "tilepipe-visit 3\nthreads 1\npool warm %d %d\npool fresh %d %d\n", warmSets, visit.WarmGap, freshSets, visit.FreshGap)
	for i, p := range vc.sig {
		fmt.Fprintf(&sb, "param %s %s %s %d %d %d", p.Role, p.Name, p.Dtype, p.bytes(), 5+2*i, 6+2*i)
		for _, d := range p.Shape {
			fmt.Fprintf(&sb, " %d", d)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// write replaces VISIT.txt (tests break it on purpose).
func (vc *visitCase) write(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(vc.path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// files are the memory files in fd order, for visit.Spec.Files.
func (vc *visitCase) files() []*os.File {
	var fs []*os.File
	for _, m := range vc.mem {
		fs = append(fs, m.File)
	}
	return fs
}

// file is the memory file of param name in pool.
func (vc *visitCase) file(name, pool string) *visit.MemFile {
	for i, p := range vc.sig {
		if p.Name == name {
			return vc.mem[2*i+slices.Index(pools, pool)]
		}
	}
	panic("no param " + name)
}

// outputs copies every set of every output of pool, by name.
func (vc *visitCase) outputs(pool string) map[string][][]byte {
	out := map[string][][]byte{}
	for _, p := range vc.sig {
		if p.Role == "output" {
			m := vc.file(p.Name, pool)
			for s := range poolSets(pool) {
				out[p.Name] = append(out[p.Name], bytes.Clone(m.Set(s)))
			}
		}
	}
	return out
}

// fill writes the fill pattern over every output set of both pools.
func (vc *visitCase) fill() {
	for _, p := range vc.sig {
		if p.Role == "output" {
			for _, pool := range pools {
				vc.file(p.Name, pool).Fill(visit.FillPattern(p.Dtype, fillDraw))
			}
		}
	}
}

// timerArgv is the command line replay runs for a process build (without
// a sandbox): INTERPRETER SCRIPT ARGS... --visit VISIT.txt.
func timerArgv(p *processResp, visitPath string) []string {
	return append(append([]string{p.Interpreter, p.Script}, p.Args...), "--visit", visitPath)
}

// withOp is p with the op after --op replaced: how a test selects a
// test-only op of wrapper.py.
func withOp(p *processResp, op string) *processResp {
	q := *p
	q.Args = slices.Clone(p.Args)
	q.Args[1] = op
	return &q
}

// visitEnv is a visit's whole environment, scrubbed as replay scrubs it,
// with the variables the process build recorded.
func visitEnv(p *processResp) []string {
	env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", "TMPDIR=/tmp",
		"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, k+"="+p.Env[k])
	}
	return env
}

// visitSpec starts the built process timer on one thread, with fd 3 and
// fd 4 as replay's command socket and report pipe, vc's memory files as fd 5
// and up, and no sandbox.
func visitSpec(work string, p *processResp, vc *visitCase) visit.Spec {
	return visit.Spec{Argv: timerArgv(p, vc.path), Env: visitEnv(p), Dir: work, Timeout: cmdTimeout, Threads: 1, Files: vc.files()}
}

func startVisit(t *testing.T, work string, p *processResp, vc *visitCase) *visit.Session {
	t.Helper()
	sess, err := visit.Start(context.Background(), visitSpec(work, p, vc))
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// plan drives a visit as replay does, briefly: 1 ms of warm-up,
// calibration to 1 ms, then 3 empty, 3 batch and 2 single samples.
var plan = visit.Plan{Warmup: time.Millisecond, Sample: time.Millisecond, Samples: 3, Singles: 2, MaxCalls: 1 << 20}

// sampler is replay's part of a visit between the validated and the
// final report: it keeps the outputs validation left in the warm files,
// writes the fill pattern over every output, drives the samples
// (visit.Session.Drive, with replay's clock checks), then, with novel,
// freezes the visit, takes a novel sample on every fresh set and keeps
// the fresh outputs right when its answer arrives (the visit is frozen
// again by then, as replay reads them).
func (vc *visitCase) sampler(plan visit.Plan, novel bool) visit.Sampler {
	return func(s *visit.Session) ([]visit.Sample, int64, error) {
		vc.validated = vc.outputs(visit.PoolWarm)
		vc.fill()
		ss, n, err := s.Drive(plan)
		if err != nil || !novel {
			return ss, n, err
		}
		if err := s.Freeze(); err != nil {
			return ss, n, err
		}
		span, ns, err := s.Novel(freshSets)
		if err != nil {
			return ss, n, err
		}
		vc.fresh = vc.outputs(visit.PoolFresh)
		smp := visit.Sample{Kind: samples.KindNovel, Calls: freshSets, SpanNs: span.Nanoseconds(), TimerNs: ns}
		return append(ss, smp), n, visit.CheckClock(smp)
	}
}

// freezer is the cgroup limiter runVisit's visits run under where this
// machine can freeze a visit (a novel sample is taken of a frozen one),
// or nil: there they take the warm samples alone, as TestNovelSamples and
// TestTorchEagerNovel skip.
var freezer = sync.OnceValue(func() *visit.Limiter {
	if l, err := visit.ProbeLimiter(); err == nil && l.CanFreeze() {
		return l
	}
	return nil
})

// runVisit runs one whole visit (visit.RunAll): the validated report, the
// samples and the novel sample (when validation passed and there is a
// freezer), the final report and the end of the processes.
func runVisit(t *testing.T, work string, p *processResp, vc *visitCase) *visit.Run {
	t.Helper()
	spec := visitSpec(work, p, vc)
	spec.Limiter = freezer()
	vc.novel = spec.Limiter != nil
	if !vc.novel {
		t.Log("no cgroup freezer here: the visit takes no novel sample, and its fresh outputs go unchecked")
	}
	r, err := visit.RunAll(context.Background(), spec, vc.sampler(plan, vc.novel))
	if err != nil {
		t.Fatal(err)
	}
	return r
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
	// The only variable a process build may set is the OpenBLAS core type
	// its BLAS calls need (TestTorchEagerCoreType checks when).
	_, core := p.Env["OPENBLAS_CORETYPE"]
	if !filepath.IsAbs(p.Interpreter) || p.Script != "wrapper.py" || len(p.Env) > 1 || len(p.Env) == 1 && !core {
		t.Errorf("process = %+v, want an absolute interpreter, script wrapper.py, no env but a core type", p)
	}
	if len(p.Args) < 4 || p.Args[0] != "--op" || p.Args[1] != op || p.Args[2] != "--device" || p.Args[3] != "cpu" {
		t.Errorf("process args = %q, want them to start with --op %s --device cpu", p.Args, op)
	}
	if p.OutputPolicy != "out" && p.OutputPolicy != "copy" {
		t.Errorf("output_policy = %q, want out or copy", p.OutputPolicy)
	}
	// Its closure listing runs every op on the device, whatever the case.
	if !slices.Equal(p.ClosureArgs, []string{"--device", "cpu"}) {
		t.Errorf("closure_args = %q, want [--device cpu]", p.ClosureArgs)
	}
	if b.Toolchain["interpreter"] != p.Interpreter || b.Toolchain["torch"] == nil || b.Toolchain["python"] == nil {
		t.Errorf("toolchain = %v, want interpreter %s, torch and python", b.Toolchain, p.Interpreter)
	}
}

// torchCase is one torch-eager case of TestTorchEagerVisit. unsupported,
// when set, is the library error torch 1.13 on CPU gives for the case:
// there the build must answer exactly `unsupported` with it.
type torchCase struct {
	op          string
	dims        map[string]int
	dtype       string
	ranking     string
	unsupported string
}

func torchCases() []torchCase {
	mn := map[string]int{"M": 5, "N": 33}
	mnk := map[string]int{"M": 7, "N": 12, "K": 5}
	var cs []torchCase
	for _, op := range []string{"gemm", "gemm_relu", "gemm_gelu"} {
		cs = append(cs, torchCase{op: op, dims: mnk})
	}
	cs = append(cs,
		torchCase{op: "bmm", dims: map[string]int{"B": 2, "M": 3, "N": 5, "K": 4}},
		torchCase{op: "gemv", dims: map[string]int{"M": 9, "K": 13}},
		torchCase{op: "rope", dims: map[string]int{"M": 3, "N": 10, "R": 6}},
		torchCase{op: "rope", dims: map[string]int{"M": 2, "N": 8, "R": 8}},
		torchCase{op: "embedding", dims: map[string]int{"V": 7, "D": 5, "M": 9}},
		torchCase{op: "attention", dims: map[string]int{"B": 2, "Hq": 4, "Hkv": 2, "Q": 3, "K": 5, "D": 4, "Dv": 3}},
		torchCase{op: "attention", dims: map[string]int{"B": 1, "Hq": 3, "Hkv": 1, "Q": 4, "K": 4, "D": 2, "Dv": 5}},
	)
	for _, op := range []string{"add", "gelu_add", "sigmoid_pair", "gelu_pair", "swiglu", "sum", "max",
		"softmax", "rmsnorm", "layernorm", "residual_layernorm", "cross_entropy", "scan_ordered", "scan", "argmax"} {
		cs = append(cs, torchCase{op: op, dims: mn})
	}
	for _, r := range []string{"stable", "standard"} {
		cs = append(cs, torchCase{op: "sort", dims: mn, ranking: r})
		for _, k := range []int{1, 33} {
			cs = append(cs, torchCase{op: "topk", dims: map[string]int{"M": 5, "N": 33, "K": k}, ranking: r})
		}
	}
	// Half storage: every op in bf16; in f16, the ones this torch runs and
	// two it lacks.
	for _, c := range slices.Clone(cs) {
		if slices.Contains([]string{"gemm", "gemm_relu", "gemm_gelu", "bmm", "gemv", "add", "gelu_add", "sigmoid_pair",
			"gelu_pair", "swiglu", "rope", "rmsnorm", "layernorm", "residual_layernorm"}, c.op) && c.dims["R"] != 8 {
			c.dtype = "bf16"
			cs = append(cs, c)
		}
	}
	cs = append(cs,
		torchCase{op: "add", dims: mn, dtype: "f16"},
		torchCase{op: "rope", dims: map[string]int{"M": 3, "N": 10, "R": 6}, dtype: "f16"},
		torchCase{op: "gemm", dims: mnk, dtype: "f16", unsupported: `RuntimeError: "addmm_impl_cpu_" not implemented for 'Half'`},
		torchCase{op: "layernorm", dims: mn, dtype: "f16", unsupported: `RuntimeError: "LayerNormKernelImpl" not implemented for 'Half'`},
	)
	return cs
}

func (c torchCase) name() string {
	s := c.op
	for _, k := range []string{"B", "Hq", "Hkv", "V", "D", "M", "N", "K", "Q", "Dv", "R"} {
		if v, ok := c.dims[k]; ok {
			s += fmt.Sprintf("-%s%d", k, v)
		}
	}
	if c.dtype != "" {
		s += "-" + c.dtype
	}
	if c.ranking != "" {
		s += "-" + c.ranking
	}
	return s
}

// TestTorchEagerVisit builds every op (and half storage, and both ranking
// contracts) and checks one real visit's outputs against float64: those
// validation left in every warm set, the same bytes there after the timed
// samples (which ran over the fill pattern), and every fresh set's after
// the novel sample.
func TestTorchEagerVisit(t *testing.T) {
	t.Parallel()
	d := requireRoute(t, "torch-eager")
	torch13 := strings.HasPrefix(d.Version, "torch 1.13.")
	for _, c := range torchCases() {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !slices.Contains([]string{"gemm", "add", "softmax", "topk"}, c.op) {
				t.Skip("long: make test visits every op; -short a gemm, an add, a softmax and a topk")
			}
			if c.dtype == "" {
				c.dtype = "f32"
			}
			sig := signatureF(c.op, c.dims, c.dtype)
			b, work := buildCase(t, "torch-eager", c.op, c.dims, sig, c.dtype, c.ranking)
			if c.unsupported != "" && torch13 {
				ver := strings.Fields(d.Version)[1]
				want := fmt.Sprintf("torch %s on cpu cannot run %s in %s: %s", ver, c.op, c.dtype, c.unsupported)
				if b.Status != "unsupported" || b.Reason != want || b.Process != nil {
					t.Errorf("torch-eager build %s = status %q reason %q, want unsupported %q", c.name(), b.Status, b.Reason, want)
				}
				return
			}
			if b.Status == "unsupported" && !torch13 && strings.Contains(b.Reason, " cannot run ") {
				t.Skipf("this torch lacks %s: %s", c.name(), b.Reason)
			}
			checkProcessBuild(t, c.op, b)
			t.Logf("output_policy %s", b.Process.OutputPolicy)

			vc := newVisitCase(t, c.op, c.dims, sig, nil)
			r := runVisit(t, work, b.Process, vc)
			checkPassed(t, c.name(), r, b.Process.OutputPolicy, vc.novel)
			checkVisitOutputs(t, c, vc)
		})
	}
}

// pass is the checks of a report where every check passed.
var pass = map[string]string{"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}

// checkPassed asserts a visit that passed: both reports ok with every
// check passed, threads 1, the build's output policy, every sample taken
// (the novel one last, on every fresh set, where novel) with a timer's
// number for each that made calls, a clean exit and nothing on stdout.
func checkPassed(t *testing.T, name string, r *visit.Run, policy string, novel bool) {
	t.Helper()
	v := r.Validated
	if r.Reason != "" || v.Status != "ok" || v.Reason != "" || !reflect.DeepEqual(v.Checks, pass) {
		t.Fatalf("visit %s: validated %+v, failure %q; want ok with every check passed", name, v, r.Reason)
	}
	if v.Threads != 1 || v.OutputPolicy != policy {
		t.Errorf("visit %s: threads %d output_policy %q, want 1, %q (build's)", name, v.Threads, v.OutputPolicy, policy)
	}
	if v.ColdNs <= 0 {
		t.Errorf("visit %s: cold_ns %d, want the first call's time", name, v.ColdNs)
	}
	if r.Final == nil || r.Final.Status != "ok" || r.Final.Reason != "" || !reflect.DeepEqual(r.Final.Checks, pass) {
		t.Errorf("visit %s: final report %+v, want ok with every check passed", name, r.Final)
	}
	kinds := map[string]int{}
	for _, s := range r.Samples {
		kinds[s.Kind]++
		if s.Calls > 0 && s.TimerNs <= 0 {
			t.Errorf("visit %s: sample %+v: the timer reported %d ns for %d calls", name, s, s.TimerNs, s.Calls)
		}
	}
	want := map[string]int{samples.KindEmpty: 3, samples.KindBatch: 3, samples.KindSingle: 2}
	if novel {
		want[samples.KindNovel] = 1
	}
	if !reflect.DeepEqual(kinds, want) || r.Calls < 1 {
		t.Errorf("visit %s: samples %v (%d calls per batch sample), want %v", name, kinds, r.Calls, want)
	}
	if n := len(r.Samples); novel && (n == 0 || r.Samples[n-1].Kind != samples.KindNovel || r.Samples[n-1].Calls != freshSets) {
		t.Errorf("visit %s: samples %+v, want the novel one last with %d calls", name, r.Samples, freshSets)
	}
	if r.Out.Exit != 0 || len(r.Out.Stdout) != 0 {
		t.Errorf("visit %s: exit %d, stdout %q; want 0 and nothing", name, r.Out.Exit, r.Out.Stdout)
	}
	if len(r.Out.Stderr) > 0 {
		t.Logf("visit %s stderr:\n%s", name, r.Out.Stderr)
	}
}

// checkVisitOutputs checks every output a visit of vc left: in every warm
// set, what validation left there against the reference of the set's
// inputs, and the same bytes still there after the timed samples (which
// started from the fill pattern); in every fresh set, what the novel
// sample wrote over the fill, against the reference (where vc.novel);
// every canary byte of the output files whole.
func checkVisitOutputs(t *testing.T, c torchCase, vc *visitCase) {
	t.Helper()
	if vc.validated == nil || vc.novel && vc.fresh == nil {
		t.Fatalf("visit %s: the outputs were not read after validation and the novel sample", c.name())
	}
	for _, pool := range pools {
		got := vc.validated
		if pool == visit.PoolFresh {
			if !vc.novel {
				continue
			}
			got = vc.fresh
		}
		for s := range poolSets(pool) {
			outs := map[string][]byte{}
			for name, sets := range got {
				outs[name] = sets[s]
			}
			checkOutputs(t, c, vc.sig, fmt.Sprintf("%s set %d", pool, s), outs, vc.in[pool][s])
		}
	}
	for _, p := range vc.sig {
		if p.Role != "output" {
			continue
		}
		for _, pool := range pools {
			m := vc.file(p.Name, pool)
			if err := m.CheckCanary(); err != nil {
				t.Errorf("visit %s: %v", c.name(), err)
			}
		}
		m := vc.file(p.Name, visit.PoolWarm)
		for s := range warmSets {
			if i := m.FirstDiff(s, vc.validated[p.Name][s], dtypeSize[p.Dtype]); i >= 0 {
				t.Errorf("visit %s: output %s warm set %d element %d after the timed samples differs from what validation left", c.name(), p.Name, s, i)
			}
		}
	}
}

// checkOutputs compares the outputs of one buffer set (bytes by name,
// what names the set) with the reference of its inputs in: selection ops
// and scan_ordered exactly, the rest within tolerance.
func checkOutputs(t *testing.T, c torchCase, sig []param, what string, outs map[string][]byte, in tensors) {
	t.Helper()
	want := reference(c.op, c.dims, in)
	got, raw := tensors{}, map[string][]uint64{}
	for _, p := range sig {
		if p.Role == "output" {
			b := outs[p.Name]
			got[p.Name], raw[p.Name] = decodeValues(p.Dtype, b)
			if len(got[p.Name]) != p.elems() || len(b) != p.bytes() {
				t.Fatalf("%s %s: %d bytes, want %d %s elements", what, p.Name, len(b), p.elems(), p.Dtype)
			}
		}
	}
	name := func(n string) string { return what + " " + n }
	switch {
	case c.op == "scan_ordered":
		checkExact(t, name("Y"), raw["Y"], want["Y"], "f32")
	case c.op == "embedding":
		checkExact(t, name("Y"), raw["Y"], want["Y"], "f32")
	case c.ranking == "standard":
		N, n := c.dims["N"], len(want["V"])/c.dims["M"]
		checkStandard(t, name(c.op), in["X"], got["V"], raw["V"], got["I"], want["V"], N, n)
	case c.op == "argmax" || c.ranking == "stable":
		checkExact(t, name("V"), raw["V"], want["V"], "f32")
		checkExact(t, name("I"), raw["I"], want["I"], "i64")
	default:
		for _, p := range sig {
			if p.Role == "output" {
				checkClose(t, name(p.Name), got[p.Name], want[p.Name], tolerance(c.dtype))
			}
		}
	}
	if c.op == "rope" {
		N, R := c.dims["N"], c.dims["R"]
		for i, x := range in["X"] {
			if i%N >= R && got["Y"][i] != x {
				t.Errorf("%s: rope tail Y[%d] = %g, want X's %g exactly", what, i, got["Y"][i], x)
			}
		}
	}
}

// TestTorchEagerClosureAccessed: the closure listing names what a load
// reads and runs besides what it maps and imports (a torch-compile visit
// failed on an H100 in a sandbox built from a listing without them). The
// real hook, in a real process: a file opened for reading and a program
// run by name through PATH are listed; a file opened for writing, one
// under a skipped (scratch) directory and /proc are not.
func TestTorchEagerClosureAccessed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	read, wrote, scratch := filepath.Join(dir, "read.c"), filepath.Join(dir, "wrote.txt"), filepath.Join(dir, "scratch")
	if err := os.WriteFile(read, []byte("int x;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import wrapper
read, wrote, scratch = sys.argv[2:5]
a = wrapper.Accessed([scratch])
sys.addaudithook(a)
open(read).read()
open(wrote, "w").write("x")
open(os.path.join(scratch, "k"), "w").write("y")
open(os.path.join(scratch, "k")).read()
open("/proc/self/status").read()
subprocess.run(["true"], check=True)
for p in sorted(a.paths):
    print(p)
`
	cmd := exec.Command("/usr/bin/python3", "-c", script, "torch-eager", read, wrote, scratch)
	cmd.Env = commandEnv(nil)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hook: %v\n%s", err, out)
	}
	listed := strings.Split(strings.TrimSpace(string(out)), "\n") // one path a line: TMPDIR may hold spaces (test-hostile)
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	trueBin, _ = filepath.EvalSymlinks(trueBin)
	realRead, _ := filepath.EvalSymlinks(read)
	for _, want := range []string{realRead, trueBin} {
		if !slices.Contains(listed, want) {
			t.Errorf("listed %q, want %s", listed, want)
		}
	}
	for _, p := range listed {
		if strings.HasSuffix(p, "wrote.txt") || strings.Contains(p, "/scratch/") || strings.HasPrefix(p, "/proc/") {
			t.Errorf("listed %s: a written, scratch or /proc file", p)
		}
	}
}

// TestCompileEnvPinsArchitecture: Triton keys the driver module it
// builds with gcc by platform.architecture(), which asks the `file`
// program; a visit's sandbox has none. Without `file` on PATH, Python
// answers ("64bit", "") where the build sandbox got ("64bit", "ELF"), and
// every torch-compile visit on an H100 missed the stored module. After
// compile_env the answer is the one `file` gives, with no `file` to run,
// and no program is started.
func TestCompileEnvPinsArchitecture(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("file"); err != nil {
		t.Skip("no file program here to compare with")
	}
	script := `
import platform, sys
sys.path.insert(0, sys.argv[1])
import wrapper
ran = []
sys.addaudithook(lambda ev, args: ran.append(args[0]) if ev == "subprocess.Popen" else None)
if sys.argv[2] == "pinned":
    wrapper.compile_env(sys.argv[3])
print("%s,%s %d" % (platform.architecture() + (len(ran),)))
`
	run := func(how, path string) string {
		cmd := exec.Command("/usr/bin/python3", "-c", script, "torch-eager", how, t.TempDir())
		cmd.Env = append(commandEnv(nil), "PATH="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", how, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	withFile := run("unpinned", os.Getenv("PATH"))
	if withFile != "64bit,ELF 1" {
		t.Fatalf("platform.architecture() with file on PATH = %q, want 64bit,ELF after one program", withFile)
	}
	if got := run("unpinned", "/nonexistent"); got != "64bit, 1" {
		t.Errorf("platform.architecture() without file = %q, want Python's fallback 64bit, (the fault the pin answers)", got)
	}
	for _, path := range []string{"/nonexistent", os.Getenv("PATH")} {
		if got := run("pinned", path); got != "64bit,ELF 0" {
			t.Errorf("platform.architecture() after compile_env, PATH %s = %q, want 64bit,ELF and no program run", path, got)
		}
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
// test-only op and asserts the exact failure: in the validated report for
// the checks of steps 1-6, in the final report for what only the checks
// after timing (or a timed call) can see. Either way the timer then waits
// for fd 3 to close and exits 0, with nothing more on fd 4 and nothing on
// stdout. A write to an input cannot get that far: the input is a
// read-only mapping of a sealed memory file, so the wrapper dies of it.
func TestTorchEagerChecks(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	sig := signature("add", dims)
	b, work := build(t, "torch-eager", "add", dims, sig)
	checkProcessBuild(t, "add", b)
	// C is 5x33 f32, 660 bytes: set 0 of the warm file is bytes
	// [4096, 4756), set 1 starts at 4096 + 704 (660 aligned to 64) + 4096.
	if l := visit.NewLayout(visit.PoolWarm, warmSets, sig[2].bytes()); l.Offset(0)+l.Bytes != 4756 || l.Offset(1) != 8896 {
		t.Fatalf("C's warm layout: set 0 at %d (%d bytes), set 1 at %d; want 4096 (660), 8896", l.Offset(0), l.Bytes, l.Offset(1))
	}
	checks := func(guards, poison, inputs, repeat string) map[string]string {
		return map[string]string{"guards": guards, "poison": poison, "inputs": inputs, "repeat": repeat}
	}
	const p, f, n = "pass", "fail", "not_run"

	for _, tc := range []struct {
		op, reason string
		checks     map[string]string // nil: no report, the wrapper died
		timed      bool              // the failure is in the final report
		canary     string            // the output canary replay finds changed afterwards, "" for none
	}{
		// The first byte after C's warm set 0, written by its first call.
		{"_overrun_output", "guard_overwritten: C warm byte 4756", checks(f, n, n, n), false, "guard_overwritten: C warm byte 4756"},
		{"_skip_output", "output_not_overwritten: C set 0 element 0", checks(p, f, n, n), false, ""},
		{"_realloc_output", "output_reallocated: C set 0", checks(p, f, n, n), false, ""},
		{"_mutate_input", "crashed: killed by signal 11 (segmentation fault)", nil, false, ""},
		{"_unrepeatable", "not_repeatable: C set 0 byte 0", checks(p, p, p, f), false, ""},
		// The last canary byte before C's warm set 1, written by the first
		// timed call (on warm set 0).
		{"_late_overrun", "guard_overwritten: C warm byte 8895 (after timing)", checks(f, n, n, n), true, "guard_overwritten: C warm byte 8895"},
		// A call that raises while timed fails the final report; every check
		// had passed, as in the C harness's entry_failed.
		{"_late_raise", "entry_failed: raised RuntimeError: _late_raise: first timed call raised: <- FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/_late_raise' (during timing)", pass, true, ""},
	} {
		t.Run(tc.op, func(t *testing.T) {
			t.Parallel()
			vc := newVisitCase(t, "add", dims, sig, nil)
			r := runVisit(t, work, withOp(b.Process, tc.op), vc)
			v := r.Validated
			if len(r.Out.Stdout) != 0 {
				t.Errorf("visit %s: stdout %q, want nothing", tc.op, r.Out.Stdout)
			}
			// An entry that raised leaves its whole traceback, causes
			// included, on stderr (kept with the visit's record).
			if tc.op == "_late_raise" && !bytes.Contains(r.Out.Stderr, []byte("The above exception was the direct cause of the following exception")) {
				t.Errorf("visit %s: stderr %q, want the chained traceback", tc.op, r.Out.Stderr)
			}
			for _, pool := range pools {
				m := vc.file("C", pool)
				want := ""
				if pool == visit.PoolWarm {
					want = tc.canary
				}
				got := ""
				if err := m.CheckCanary(); err != nil {
					got = err.Error()
				}
				if got != want {
					t.Errorf("visit %s: C's %s file after the visit: canary check %q, want %q", tc.op, pool, got, want)
				}
			}
			if tc.checks == nil {
				// Dead before any report: the input is as replay sealed it.
				if v.Type != "" || r.Final != nil || r.Reason != tc.reason {
					t.Errorf("visit %s: validated %+v, final %+v, first failure %q; want no report and %q", tc.op, v, r.Final, r.Reason, tc.reason)
				}
				for s := range warmSets {
					if got, want := vc.file("A", visit.PoolWarm).Set(s), encode("f32", vc.in[visit.PoolWarm][s]["A"]); !bytes.Equal(got, want) {
						t.Errorf("visit %s: input A warm set %d changed", tc.op, s)
					}
				}
				return
			}
			if v.Threads != 1 || v.OutputPolicy != "out" {
				t.Errorf("visit %s: validated threads %d output_policy %q, want 1, out", tc.op, v.Threads, v.OutputPolicy)
			}
			if r.Out.Exit != 0 {
				t.Errorf("visit %s: exit %d, want 0", tc.op, r.Out.Exit)
			}
			if !tc.timed {
				if v.Status != "failed" || v.Reason != tc.reason || !reflect.DeepEqual(v.Checks, tc.checks) || r.Reason != tc.reason {
					t.Errorf("visit %s: validated status %q reason %q checks %v, first failure %q; want failed %q %v", tc.op, v.Status, v.Reason, v.Checks, r.Reason, tc.reason, tc.checks)
				}
				if r.Final != nil || len(r.Samples) != 0 || vc.validated != nil {
					t.Errorf("visit %s: a failed validation went on to %d samples and final report %+v", tc.op, len(r.Samples), r.Final)
				}
				return
			}
			if v.Status != "ok" || !reflect.DeepEqual(v.Checks, pass) {
				t.Errorf("visit %s: validated %+v, want ok", tc.op, v)
			}
			if want := 8; vc.novel && (len(r.Samples) != want+1 || vc.fresh == nil) || !vc.novel && len(r.Samples) != want {
				t.Errorf("visit %s: %d samples, novel sample taken %v; want 3 empty, 3 batch, 2 single and, with a freezer (%v), the novel one", tc.op, len(r.Samples), vc.fresh != nil, vc.novel)
			}
			f := r.Final
			if f == nil || f.Status != "failed" || f.Reason != tc.reason || !reflect.DeepEqual(f.Checks, tc.checks) || r.Reason != tc.reason {
				t.Errorf("visit %s: final report %+v, first failure %q; want failed %q %v", tc.op, f, r.Reason, tc.reason, tc.checks)
			}
		})
	}
}

// TestTorchEagerProtocol checks the wrapper's side of protocol 3 beyond the
// checks: what it refuses (exit 2, one line on stderr, nothing on stdout:
// malformed visit files and memory files, malformed commands) and the two
// test-only ops that lie to replay: _liar (timings it did not measure) and
// _chatty (a fake report on stdout).
func TestTorchEagerProtocol(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	sig := signature("add", dims)
	b, work := build(t, "torch-eager", "add", dims, sig)
	checkProcessBuild(t, "add", b)
	newVisit := func(t *testing.T) *visitCase { return newVisitCase(t, "add", dims, sig, nil) }

	t.Run("no_fds", func(t *testing.T) {
		t.Parallel()
		// sh closes fds 3 and 4 whatever this test inherited.
		argv := append([]string{"/bin/sh", "-c", `exec 3>&- 4>&-; exec "$@"`, "sh"}, timerArgv(b.Process, newVisit(t).path)...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = work, visitEnv(b.Process)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		const want = "wrapper.py: fds 3 and 4: want replay's command socket and report pipe (docs/protocol.md, visit)\n"
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("visit without fds 3 and 4 = %v, stderr %q, stdout %q; want exit 2, stderr %q, no stdout", err, stderr.String(), stdout.String(), want)
		}
	})

	// A VISIT.txt that is not protocol 3's, or memory files that are not
	// the ones it names: refused before any call. C's warm file is 20480
	// bytes (3 sets of 660 bytes, gap 4096), its fresh file 4096.
	const fds = "(memory files are fds 5 and up, in the order the visit file names them)"
	for _, tc := range []struct {
		name     string
		old, new string                                  // VISIT.txt with old replaced by new
		files    func(*testing.T, []*os.File) []*os.File // nil: vc's files
		want     string                                  // "VISIT" stands for the visit file's path
	}{
		{"protocol2", "tilepipe-visit 3", "tilepipe-visit 2", nil, `VISIT:1: bad header, want "tilepipe-visit 3"`},
		{"warmup_ms", "threads 1\n", "threads 1\nwarmup_ms 1\n", nil, `VISIT:3: unknown key "warmup_ms"`},
		// The L2 policy is a GPU visit's key (rows named cuda_ run the
		// wrapper with --device cuda; the file is read before CUDA is
		// touched, so no GPU is needed).
		{"l2_on_cpu", "threads 1\n", "threads 1\nl2 flush\n", nil, `VISIT:3: unknown key "l2"`},
		{"cuda_l2_cold", "threads 1\n", "threads 1\nl2 cold\n", nil, `VISIT:3: l2: want "l2 warm" or "l2 flush"`},
		{"cuda_l2_twice", "threads 1\n", "threads 1\nl2 warm\nl2 flush\n", nil, `VISIT:4: duplicate key "l2"`},
		{"graph_on_cpu", "threads 1\n", "threads 1\ngraph 32\n", nil, `VISIT:3: unknown key "graph"`},
		{"cuda_graph_zero", "threads 1\n", "threads 1\ngraph 0\n", nil, `VISIT:3: graph: want one integer in [1, 10000000]`},
		{"cuda_graph_twice", "threads 1\n", "threads 1\ngraph 2\ngraph 2\n", nil, `VISIT:4: duplicate key "graph"`},
		{"samples", "threads 1\n", "samples 3\nthreads 1\n", nil, `VISIT:2: unknown key "samples"`},
		{"threads0", "threads 1", "threads 0", nil, `VISIT:2: threads: want one integer in [1, 1048576]`},
		{"threads_twice", "threads 1\n", "threads 1\nthreads 1\n", nil, `VISIT:3: duplicate key "threads"`},
		{"no_threads", "threads 1\n", "", nil, `VISIT: missing key "threads"`},
		{"one_warm_set", "pool warm 3", "pool warm 1", nil, `VISIT:3: pool warm: sets "1", want an integer in [2, 1048576]`},
		{"no_fresh_set", "pool fresh 2", "pool fresh 0", nil, `VISIT:4: pool fresh: sets "0", want an integer in [1, 1048576]`},
		{"pool_twice", "pool fresh 2 64\n", "pool fresh 2 64\npool fresh 2 64\n", nil, `VISIT:5: duplicate key "pool fresh"`},
		{"pools_swapped", "pool warm 3 4096\npool fresh 2 64\n", "pool fresh 2 64\npool warm 3 4096\n", nil, `VISIT:3: pool fresh before pool warm`},
		{"gap", "pool fresh 2 64", "pool fresh 2 60", nil, `VISIT:4: pool fresh: gap "60", want a positive multiple of 64`},
		{"no_pools", "pool warm 3 4096\npool fresh 2 64\n", "", nil, `VISIT:3: param before "pool warm" and "pool fresh"`},
		{"old_param", "param input A f32 660 5 6 5 33", "param input A f32 660 /visit/A.bin 5 33", nil, `VISIT:5: param A: warm fd "/visit/A.bin", want 5 ` + fds},
		{"pipe_fd", "A f32 660 5 6", "A f32 660 4 6", nil, `VISIT:5: param A: warm fd "4", want 5 ` + fds},
		{"fds_swapped", "B f32 660 7 8", "B f32 660 8 7", nil, `VISIT:6: param B: warm fd "8", want 7 ` + fds},
		{"signature", "param input B", "param input D", nil,
			`visit params [('A', 'input'), ('D', 'input'), ('C', 'output')] do not match op add's signature [('A', 'input'), ('B', 'input'), ('C', 'output')]`},
		// Not a missing descriptor: one this process inherited may sit at
		// its number.
		{"not_memory_file", "", "", func(t *testing.T, fs []*os.File) []*os.File { return append(fs[:5], devNull(t)) }, `param C fresh: fd 10: not a memory file`},
		{"files_swapped", "", "", func(t *testing.T, fs []*os.File) []*os.File {
			fs[4], fs[5] = fs[5], fs[4]
			return fs
		}, `param C warm: fd 9 holds 4096 bytes, want 20480 (3 sets of 660 bytes, gap 4096)`},
		// A's sealed warm file as C's too: it cannot be mapped for writing.
		{"sealed_output", "", "", func(t *testing.T, fs []*os.File) []*os.File {
			fs[4] = fs[0]
			return fs
		}, `param C warm: fd 9: map read-write: Operation not permitted`},
		// C's writable warm file as A's: an input must be sealed.
		{"unsealed_input", "", "", func(t *testing.T, fs []*os.File) []*os.File {
			fs[0], fs[4] = fs[4], fs[0]
			return fs
		}, `param A warm: fd 5 is not sealed against writes`},
	} {
		t.Run("visit_file_"+tc.name, func(t *testing.T) {
			t.Parallel()
			vc := newVisit(t)
			if tc.old != "" {
				text := vc.text()
				if !strings.Contains(text, tc.old) {
					t.Fatalf("VISIT.txt %q lacks %q", text, tc.old)
				}
				vc.write(t, strings.Replace(text, tc.old, tc.new, 1))
			}
			spec := visitSpec(work, b.Process, vc)
			if tc.files != nil {
				spec.Files = tc.files(t, spec.Files)
			}
			if strings.HasPrefix(tc.name, "cuda_") {
				i := slices.Index(spec.Argv, "--device")
				if i < 0 || spec.Argv[i+1] != "cpu" {
					t.Fatalf("argv %q has no --device cpu", spec.Argv)
				}
				spec.Argv = slices.Clone(spec.Argv)
				spec.Argv[i+1] = "cuda"
			}
			sess, err := visit.Start(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			want := "wrapper.py: " + strings.Replace(tc.want, "VISIT", vc.path, 1)
			_, err = sess.Validated()
			out, _ := sess.Finish(false)
			var f *visit.Failure
			if !errors.As(err, &f) || f.Reason != "exited: status 2: "+want || out.Exit != 2 || string(out.Stderr) != want+"\n" || len(out.Stdout) != 0 {
				t.Errorf("visit (%s): %v, exit %d, stderr %q, stdout %q; want exited: status 2: %s", tc.name, err, out.Exit, out.Stderr, out.Stdout, want)
			}
		})
	}

	// Malformed commands: a usage error after the validated report (and
	// after the samples of the commands before it).
	type smp struct{ seq, calls int64 }
	const usage = `want "run SEQ N", "novel SEQ N" or "end"`
	for _, tc := range []struct {
		name, commands, want string
		samples              []smp // the sample reports before the error
	}{
		{"bad_calls", "run 1 x\n", `wrapper.py: command "run 1 x": ` + usage, nil},
		{"extra_field", "run 1 2 3\n", `wrapper.py: command "run 1 2 3": ` + usage, nil},
		{"negative", "run 1 -1\n", `wrapper.py: command "run 1 -1": ` + usage, nil},
		{"too_many_calls", "run 1 1073741825\n", `wrapper.py: command "run 1 1073741825": ` + usage, nil},
		{"unknown", "stop\n", `wrapper.py: command "stop": ` + usage, nil},
		{"long", strings.Repeat("x", 200) + "\n", "wrapper.py: command: want one line of at most 126 bytes", nil},
		// Visit protocol 3's fresh samples are gone: "fresh SEQ N" is no
		// command, before the samples or after them.
		{"fresh", "fresh 1 1\n", `wrapper.py: command "fresh 1 1": ` + usage, nil},
		{"fresh_after_samples", "run 1 4\nnovel 2 2\nfresh 3 1\n", `wrapper.py: command "fresh 3 1": ` + usage, []smp{{1, 4}, {2, 2}}},
		// A novel sample calls fresh sets 0 to N-1: no more than there are.
		{"novel_too_many", "novel 1 3\n", `wrapper.py: command "novel 1 3": want 0 <= N <= 2 (the fresh sets)`, nil},
		{"eof", "run 7 2\n", `wrapper.py: fd 3 closed before "end"`, []smp{{7, 2}}},
	} {
		t.Run("command_"+tc.name, func(t *testing.T) {
			t.Parallel()
			reports, stdout, stderr, exit := rawVisit(t, work, b.Process, newVisit(t), tc.commands)
			if exit != 2 || stderr != tc.want+"\n" || stdout != "" {
				t.Errorf("commands %q: exit %d, stderr %q, stdout %q; want exit 2, stderr %q, no stdout", tc.commands, exit, stderr, stdout, tc.want+"\n")
			}
			lines := strings.Split(strings.TrimSuffix(reports, "\n"), "\n")
			if rep, err := visit.ParseReport([]byte(lines[0])); err != nil || rep.Type != visit.TypeValidated || rep.Status != "ok" {
				t.Errorf("commands %q: first report %q (%v), want validated ok", tc.commands, lines[0], err)
			}
			if len(lines) != 1+len(tc.samples) {
				t.Fatalf("commands %q: reports %q, want validated and %d sample(s)", tc.commands, reports, len(tc.samples))
			}
			for i, want := range tc.samples {
				if rep, err := visit.ParseReport([]byte(lines[1+i])); err != nil || rep.Type != visit.TypeSample || rep.Seq != want.seq || rep.Calls != want.calls || rep.Ns <= 0 {
					t.Errorf("commands %q: report %d %q (%v), want a sample of seq %d, %d calls", tc.commands, 1+i, lines[1+i], err, want.seq, want.calls)
				}
			}
		})
	}

	// After its last report the wrapper holds the visit open until replay
	// closes fd 3 (replay reads the visit's processes and CPU time in the
	// meantime), then exits 0, as the C harness does.
	for _, tc := range []struct{ name, op, commands, last string }{
		{"holds_after_final", "add", "run 1 3\nnovel 2 2\nrun 3 0\nend\n", visit.TypeFinal},
		{"holds_after_failed_validation", "_skip_output", "", visit.TypeValidated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startRaw(t, work, withOp(b.Process, tc.op), newVisit(t))
			if _, err := r.cmdW.WriteString(tc.commands); err != nil {
				t.Fatal(err)
			}
			for {
				line, err := r.reports.ReadBytes('\n')
				if err != nil {
					t.Fatalf("reports ended (%v) before the %s report; stderr %q", err, tc.last, r.stderr.String())
				}
				rep, err := visit.ParseReport(bytes.TrimSuffix(line, []byte("\n")))
				if err != nil {
					t.Fatalf("report %q: %v", line, err)
				}
				if rep.Type == tc.last {
					break
				}
			}
			select {
			case err := <-r.exited:
				t.Fatalf("the wrapper exited (%v) while fd 3 was still open", err)
			case <-time.After(300 * time.Millisecond):
			}
			r.cmdW.Close()
			if exit := r.wait(t); exit != 0 || r.stdout.Len() != 0 {
				t.Errorf("after fd 3 closed: exit %d, stdout %q; want 0 and nothing", exit, r.stdout.String())
			}
			if rest, _ := io.ReadAll(r.reports); len(rest) != 0 {
				t.Errorf("reports after the %s report: %q", tc.last, rest)
			}
		})
	}

	// _liar measures honestly and reports a quarter of it: replay's clock
	// cross-check catches it on the batch samples (calibrated to 50 ms, so
	// the median gap, about 37 ms, is far beyond the 17.5 ms allowed),
	// whatever the load.
	t.Run("liar", func(t *testing.T) {
		t.Parallel()
		sess := startVisit(t, work, withOp(b.Process, "_liar"), newVisit(t))
		v, err := sess.Validated()
		if err != nil || v.Status != "ok" {
			sess.Finish(false)
			t.Fatalf("_liar validated %+v, %v; want ok", v, err)
		}
		_, _, err = sess.Drive(visit.Plan{Warmup: time.Millisecond, Sample: 50 * time.Millisecond, Samples: 3, Singles: 2, MaxCalls: 1 << 30})
		sess.Finish(false)
		var f *visit.Failure
		if !errors.As(err, &f) || !strings.HasPrefix(f.Reason, "clock_mismatch: batch samples: ") {
			t.Errorf("_liar driven by replay's plan: %v, want a clock_mismatch failure of the batch samples", err)
		}
	})

	// _chatty prints a fake final report on stdout during its first call;
	// everything else it does is right, its outputs too.
	t.Run("chatty", func(t *testing.T) {
		t.Parallel()
		vc := newVisit(t)
		r := runVisit(t, work, withOp(b.Process, "_chatty"), vc)
		const fake = `{"type": "final", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}}` + "\n"
		want := fmt.Sprintf("unexpected_output: %d bytes on stdout (a timer reports only on fd 4)", len(fake))
		if r.Validated.Status != "ok" || r.Final == nil || r.Final.Status != "ok" || r.Reason != want || string(r.Out.Stdout) != fake {
			t.Errorf("_chatty: validated %+v final %+v failure %q stdout %q; want both reports ok, then %q for stdout %q", r.Validated, r.Final, r.Reason, r.Out.Stdout, want, fake)
		}
		checkVisitOutputs(t, torchCase{op: "add", dims: dims, dtype: "f32"}, vc)
	})
}

// devNull is /dev/null, open for reading until the test ends.
func devNull(t *testing.T) *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// rawTimer is the wrapper started with plain pipes as fd 3 and fd 4 and
// a visit's memory files as fd 5 and up.
type rawTimer struct {
	cmd            *exec.Cmd
	cmdW, repR     *os.File
	reports        *bufio.Reader
	stdout, stderr bytes.Buffer
	exited         chan error // the result of Wait, once
}

func startRaw(t *testing.T, work string, p *processResp, vc *visitCase) *rawTimer {
	t.Helper()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	argv := timerArgv(p, vc.path)
	r := &rawTimer{cmd: exec.Command(argv[0], argv[1:]...), cmdW: cmdW, repR: repR, reports: bufio.NewReader(repR), exited: make(chan error, 1)}
	r.cmd.Dir, r.cmd.Env = work, visitEnv(p)
	r.cmd.ExtraFiles = append([]*os.File{cmdR, repW}, vc.files()...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	err = r.cmd.Start()
	cmdR.Close()
	repW.Close()
	if err != nil {
		cmdW.Close()
		repR.Close()
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		cmdW.Close()
		repR.Close()
	})
	return r
}

// wait waits (at most cmdTimeout) for the wrapper to exit and returns its
// exit status.
func (r *rawTimer) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-r.exited:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		default:
			t.Fatal(err)
		}
	case <-time.After(cmdTimeout):
		t.Fatalf("the wrapper had not exited after %s", cmdTimeout)
	}
	return -1
}

// rawVisit runs the wrapper with plain pipes as fd 3 and fd 4, writes
// commands and closes fd 3's writer, and returns everything the wrapper
// wrote on fd 4, stdout and stderr, and its exit status.
func rawVisit(t *testing.T, work string, p *processResp, vc *visitCase, commands string) (reports, stdout, stderr string, exit int) {
	t.Helper()
	r := startRaw(t, work, p, vc)
	_, werr := r.cmdW.WriteString(commands)
	r.cmdW.Close()
	rep, rerr := io.ReadAll(r.reports)
	exit = r.wait(t)
	if werr != nil || rerr != nil {
		t.Fatalf("write commands: %v; read reports: %v", werr, rerr)
	}
	return string(rep), r.stdout.String(), r.stderr.String(), exit
}

// modulesProbe prints the files of the modules os and torch (realpaths),
// each with its cached bytecode when that exists.
const modulesProbe = `import importlib.util, os, torch
for f in (os.__file__, torch.__file__):
    for p in (f, importlib.util.cache_from_source(f)):
        if os.path.isfile(p):
            print(os.path.realpath(p))
`

func TestTorchEagerClosure(t *testing.T) {
	if testing.Short() {
		t.Skip("long: torch processes of seconds each; make test runs it")
	}
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	b, work := build(t, "torch-eager", "add", dims, signature("add", dims))
	checkProcessBuild(t, "add", b)
	// As prepare lists it: the build's closure arguments, then --closure.
	argv := append(append([]string{b.Process.Interpreter, b.Process.Script}, b.Process.ClosureArgs...), "--closure")
	out := strings.TrimSpace(string(run(t, work, nil, argv...)))
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
	// Every module file the run imported, and its cached bytecode: replay's
	// sandbox shows only the directories that hold closure files, so
	// without them the interpreter finds neither its standard library nor
	// torch's Python files.
	var modules []string
	for _, line := range strings.Split(strings.TrimSpace(string(run(t, work, nil, b.Process.Interpreter, "-c", modulesProbe))), "\n") {
		modules = append(modules, strings.TrimSpace(line))
	}
	if len(modules) < 2 {
		t.Fatalf("module probe printed %q, want the files of os and torch", modules)
	}
	for _, want := range append([]string{interp, script}, modules...) {
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
	out := run(t, ".", []string{"CC=/nonexistent/cc"}, routeExe(t, "openblas"), "describe")
	d := parseDescribe(t, "openblas describe", out)
	const want = "C compiler '/nonexistent/cc' not found on PATH"
	if d.Available || d.Reason != want {
		t.Errorf("openblas describe with CC=/nonexistent/cc = available %v reason %q, want false %q", d.Available, d.Reason, want)
	}
}

// TestTorchEagerCUDA runs routes/torch-eager/cuda_test.py, the driver of
// whole --device cuda visits, under the interpreter the route builds with.
// Without a usable GPU (CI) it checks only that describe, build and
// --closure refuse cuda with "CUDA unavailable"; on a GPU it runs every op
// on the device with the checks its docstring lists (docs/gpu.md).
func TestTorchEagerCUDA(t *testing.T) {
	if testing.Short() {
		t.Skip("long: torch processes of seconds each; make test runs it")
	}
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := dimsFor("add")
	b, _ := build(t, "torch-eager", "add", dims, signature("add", dims))
	checkProcessBuild(t, "add", b)
	// The CUDA timer, whose --telemetry stages the GPU's novel slots as
	// replay's monitor does.
	dir := t.TempDir()
	src, err := harness.WriteCUDA(dir, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	monitor := filepath.Join(dir, "cuda-timer")
	if out, err := exec.Command("cc", "-O2", "-DTILEPIPE_CUDA", "-o", monitor, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build the CUDA timer: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.Process.Interpreter, filepath.Join("torch-eager", "cuda_test.py"), "-j", "4", "--monitor", monitor)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("cuda_test.py: %v", err)
	}
	if !bytes.Contains(out, []byte("\nall passed\n")) && !bytes.Contains(out, []byte("\nCUDA unavailable here (")) {
		t.Errorf("cuda_test.py printed neither \"all passed\" nor \"CUDA unavailable here\"")
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
	d := parseDescribe(t, "torch-eager describe", run(t, ".", []string{"TILEPIPE_TORCH_PYTHON=" + fake}, routeExe(t, "torch-eager"), "describe"))
	const want = "torch 9.9.9+fake (Python 3.99.0, /fake/bin/python3)"
	if !d.Available || d.Version != want {
		t.Errorf("torch-eager describe with TILEPIPE_TORCH_PYTHON=%s = available %v version %q, want true %q", fake, d.Available, d.Version, want)
	}
}

// TestTorchEagerBuildRejects feeds build malformed cases; each must fail
// with the exact reason, before any torch runs.
func TestTorchEagerBuildRejects(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	mn := map[string]int{"M": 2, "N": 10}
	for _, tc := range []struct {
		op, dtype, ranking string
		dims               map[string]int
		reason             string
	}{
		{"topk", "f32", "", map[string]int{"M": 2, "N": 10, "K": 3}, "topk wants ranking stable or standard, got None"},
		{"topk", "f32", "stable", map[string]int{"M": 2, "N": 10, "K": 11}, "topk: K=11: want K <= N=10"},
		{"attention", "f64", "", map[string]int{"B": 1, "Hq": 2, "Hkv": 1, "Q": 2, "K": 3, "D": 4, "Dv": 2}, "dtype: want one of f32, f16, bf16, got 'f64'"},
		{"add", "f32", "stable", mn, "add takes no ranking, got 'stable'"},
		{"rope", "f32", "", map[string]int{"M": 2, "N": 10, "R": 5}, "rope: R=5: want an even rotary width <= N=10"},
		{"attention", "f32", "", map[string]int{"B": 1, "Hq": 3, "Hkv": 2, "Q": 1, "K": 1, "D": 2, "Dv": 2}, "attention: Hq=3: want a multiple of Hkv=2"},
		{"bmm", "f32", "", mn, `bmm wants dims B, M, N, K as positive integers, got {"M": 2, "N": 10}`},
	} {
		t.Run(tc.op, func(t *testing.T) {
			t.Parallel()
			sig := signatureF(tc.op, tc.dims, tc.dtype)
			b, _ := buildCase(t, "torch-eager", tc.op, tc.dims, sig, tc.dtype, tc.ranking)
			if b.Status != "failed" || b.Reason != tc.reason {
				t.Errorf("torch-eager build %s %s %q %v = status %q reason %q, want failed %q", tc.op, tc.dtype, tc.ranking, tc.dims, b.Status, b.Reason, tc.reason)
			}
		})
	}
}

// TestTorchEagerRejectsInvalidIds checks that a visit refuses ids outside
// the table in any buffer set of either pool (the route never picks or
// repairs inputs): usage exit 2 before any report, the reason, naming the
// set, on stderr.
func TestTorchEagerRejectsInvalidIds(t *testing.T) {
	if testing.Short() {
		t.Skip("long: torch processes of seconds each; make test runs it")
	}
	t.Parallel()
	requireRoute(t, "torch-eager")
	dims := map[string]int{"V": 4, "D": 3, "M": 5}
	sig := signature("embedding", dims)
	b, work := build(t, "torch-eager", "embedding", dims, sig)
	checkProcessBuild(t, "embedding", b)
	for _, tc := range []struct {
		pool      string
		set, elem int
		id        float64
		want      string
	}{
		{visit.PoolWarm, 1, 3, 4, "wrapper.py: input I warm set 1 element 3 = 4, want in [0, 4)"},
		{visit.PoolFresh, 1, 2, 4, "wrapper.py: input I fresh set 1 element 2 = 4, want in [0, 4)"},
		{visit.PoolFresh, 0, 4, -1, "wrapper.py: input I fresh set 0 element 4 = -1, want in [0, 4)"},
	} {
		t.Run(fmt.Sprintf("%s_set%d", tc.pool, tc.set), func(t *testing.T) {
			t.Parallel()
			vc := newVisitCase(t, "embedding", dims, sig, func(in map[string][]tensors) {
				in[tc.pool][tc.set]["I"][tc.elem] = tc.id
			})
			sess := startVisit(t, work, b.Process, vc)
			_, err := sess.Validated()
			out, _ := sess.Finish(false)
			var f *visit.Failure
			if !errors.As(err, &f) || f.Reason != "exited: status 2: "+tc.want || out.Exit != 2 || string(out.Stderr) != tc.want+"\n" || len(out.Stdout) != 0 {
				t.Errorf("visit embedding with id %g of 4 in I %s set %d = %v, exit %d, stderr %q, stdout %q; want exit 2, stderr %q, no stdout", tc.id, tc.pool, tc.set, err, out.Exit, out.Stderr, out.Stdout, tc.want+"\n")
			}
		})
	}
}

// TestTorchEagerNovel: the process timer's novel samples (protocol 4,
// docs/protocol4-design.md) call fresh set i with whatever replay wrote
// there while the visit was frozen: after the fresh sets are rewritten
// with the warm sets' inputs, a novel sample's outputs are the warm
// outputs validation produced, byte for byte, where the sample before it
// computed the fresh inputs' answers. More calls than fresh sets is a
// usage error.
func TestTorchEagerNovel(t *testing.T) {
	t.Parallel()
	requireRoute(t, "torch-eager")
	l, err := visit.ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here (%v)", err)
	}
	dims := map[string]int{"M": 5, "N": 7}
	sig := signatureF("add", dims, "f32")
	b, work := buildCase(t, "torch-eager", "add", dims, sig, "f32", "")
	checkProcessBuild(t, "add", b)
	vc := newVisitCase(t, "add", dims, sig, nil)
	// Fresh inputs replay can rewrite: novel input files.
	for i, p := range sig {
		if p.Role != "input" {
			continue
		}
		old := vc.mem[2*i+1]
		m, err := visit.NewNovelInput(p.Name, old.Layout)
		if err != nil {
			t.Fatal(err)
		}
		for s := range freshSets {
			m.Write(s, old.Set(s))
		}
		old.Close()
		vc.mem[2*i+1] = m
	}
	spec := visitSpec(work, b.Process, vc)
	spec.Limiter = l
	var first, second map[string][][]byte
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
		vc.validated = vc.outputs(visit.PoolWarm)
		vc.fill()
		if err := s.Freeze(); err != nil {
			return nil, 0, err
		}
		if _, _, err := s.Novel(freshSets); err != nil {
			return nil, 0, err
		}
		first = vc.outputs(visit.PoolFresh)
		for _, p := range sig {
			if p.Role == "input" {
				for set := range freshSets {
					vc.file(p.Name, visit.PoolFresh).Write(set, vc.file(p.Name, visit.PoolWarm).Set(set))
				}
			}
		}
		vc.fill()
		if _, _, err := s.Novel(freshSets); err != nil {
			return nil, 0, err
		}
		second = vc.outputs(visit.PoolFresh)
		if _, _, err := s.Novel(0); err != nil {
			return nil, 0, err
		}
		_, _, err := s.Novel(freshSets + 1)
		return nil, 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for set := range freshSets {
		if !bytes.Equal(second["C"][set], vc.validated["C"][set]) {
			t.Errorf("novel sample on warm set %d's inputs: C differs from the warm outputs", set)
		}
		if bytes.Equal(first["C"][set], second["C"][set]) {
			t.Errorf("novel samples on two inputs of set %d: the same C", set)
		}
	}
	want := fmt.Sprintf(`command "novel 4 %d": want 0 <= N <= %d (the fresh sets)`, freshSets+1, freshSets)
	if !strings.HasPrefix(r.Reason, "exited: status 2: ") || !strings.Contains(r.Reason, want) {
		t.Errorf("a novel sample of more calls than fresh sets = %q, want %q", r.Reason, want)
	}
}
