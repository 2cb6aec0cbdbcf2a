package oracle

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Case is one operator at one size with one input recipe. It is the unit
// every stage and route agrees on; its JSON form is what routes receive.
type Case struct {
	ID      string             `json:"id"`
	Op      string             `json:"op"`
	Dims    map[string]int     `json:"dims"`
	Dtype   string             `json:"dtype"` // storage dtype of the float tensors: f32, f16 or bf16
	Pattern string             `json:"pattern"`
	Seed    uint64             `json:"seed"`
	Policy  string             `json:"policy"`
	Ranking string             `json:"ranking,omitempty"` // topk and sort: stable or standard
	Params  map[string]float64 `json:"params,omitempty"`
	// Device is where the case runs: "" (the CPU) or DeviceCUDA. Absent
	// means CPU, so captures made before devices existed stay valid.
	Device string `json:"device,omitempty"`
}

// Devices a case can run on ("" is the CPU).
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
)

// DeviceOf is the device a case runs on, "cpu" for an absent one.
func (c Case) DeviceOf() string {
	if c.Device == "" {
		return DeviceCPU
	}
	return c.Device
}

// A param's role: what the route reads, or what it writes.
const (
	RoleInput  = "input"
	RoleOutput = "output"
)

// Param is one tensor of a case's signature, in the order routes take them.
type Param struct {
	Name  string `json:"name"`
	Role  string `json:"role"` // RoleInput or RoleOutput
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Elems is the number of elements of p.
func (p Param) Elems() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Bytes is the size of p's dense buffer.
func (p Param) Bytes() int { return p.Elems() * DtypeSize(p.Dtype) }

// DtypeSize is the element size of a storage dtype, 0 for unknown ones.
func DtypeSize(dtype string) int {
	switch dtype {
	case "f16", "bf16":
		return 2
	case "f32":
		return 4
	case "f64", "i64":
		return 8
	}
	return 0
}

// Limits on case sizes; every dimension, tensor and matrix op must stay
// inside them.
const (
	MaxDim = 16384
	// MaxElems: the methodology's largest elementwise case (a 2^28-element
	// add, 1 GiB in FP32, 2 GiB of FP64 reference) fits.
	MaxElems = 1 << 28
	// MaxTerms: product terms of one matrix op (e.g. M·N·K); a 4096³ gemm
	// (the methodology's do_bench case) fits.
	MaxTerms = 1 << 36
)

// Policies are the numeric envelopes a case may declare (docs/oracle.md,
// "Policies"). strict is the default and the only one for most ops; tf32
// is the relaxed envelope of TF32 tensor-core matrix products, a separate
// policy recorded in the case, never a widened default.
const (
	PolicyStrict = "strict"
	PolicyTF32   = "tf32"
)

// PatternExact is the input pattern on which a strict f32 matrix case has
// one exact answer that no TF32 or BF16 evaluation gives (docs/inputs.md).
const PatternExact = "exact"

// StrictMatrix reports whether c is a strict f32 matrix case (gemm,
// gemm_relu, gemm_gelu, bmm, gemv): one whose inputs a reduced-precision
// evaluation can pass the strict bound on unless they are the exact
// pattern (docs/inputs.md, "exact"). A cohort gives such a case the exact
// pattern by default and refuses any other (cohort.Parse).
func StrictMatrix(c Case) bool {
	return tf32Ops[c.Op] && (c.Dtype == "f32" || c.Dtype == "") && (c.Policy == PolicyStrict || c.Policy == "")
}

// tf32Ops are the ops the tf32 policy applies to.
var tf32Ops = map[string]bool{"gemm": true, "gemm_relu": true, "gemm_gelu": true, "bmm": true, "gemv": true}

// Rankings are the tie contracts of topk and sort.
const (
	RankingStable   = "stable"   // ties in original index order
	RankingStandard = "standard" // ties may pick other indices; values exact, indices unique and matching
)

// opSpec describes one operator: its dimension names, which storage dtypes
// it takes, and its signature.
type opSpec struct {
	dims    []string
	ranking bool // needs a ranking contract
	// params are the case params (Case.Params) the op uses; any other is
	// refused, so a misspelt or misplaced parameter cannot pass unseen.
	params []string
	sig    func(d map[string]int, f string) []Param
	check  func(d map[string]int) error // extra constraints, may be nil
	terms  func(d map[string]int) int64 // product terms (matrix ops), may be nil
}

func in(name, dtype string, shape ...int) Param  { return Param{name, "input", dtype, shape} }
func out(name, dtype string, shape ...int) Param { return Param{name, "output", dtype, shape} }

// unary, binary: the row-wise shapes most ops share.
func mn(d map[string]int) (int, int) { return d["M"], d["N"] }

var ops = map[string]opSpec{
	"gemm":      {dims: []string{"M", "N", "K"}, sig: sigGemm, terms: termsMNK},
	"gemm_relu": {dims: []string{"M", "N", "K"}, sig: sigGemm, terms: termsMNK},
	"gemm_gelu": {dims: []string{"M", "N", "K"}, sig: sigGemm, terms: termsMNK},
	"bmm": {dims: []string{"B", "M", "N", "K"}, terms: func(d map[string]int) int64 {
		return int64(d["B"]) * termsMNK(d)
	}, sig: func(d map[string]int, f string) []Param {
		return []Param{in("A", f, d["B"], d["M"], d["K"]), in("B", f, d["B"], d["K"], d["N"]), out("C", f, d["B"], d["M"], d["N"])}
	}},
	"gemv": {dims: []string{"M", "K"}, terms: func(d map[string]int) int64 { return int64(d["M"]) * int64(d["K"]) },
		sig: func(d map[string]int, f string) []Param {
			return []Param{in("A", f, d["M"], d["K"]), in("X", f, d["K"]), out("Y", f, d["M"])}
		}},
	"add":      {dims: []string{"M", "N"}, sig: sigBinary},
	"gelu_add": {dims: []string{"M", "N"}, sig: sigBinary},
	"sigmoid_pair": {dims: []string{"M", "N"}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), out("Y", f, M, N), out("D", f, M, N)}
	}},
	"gelu_pair": {dims: []string{"M", "N"}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), out("Y", f, M, N), out("D", f, M, N)}
	}},
	"swiglu": {dims: []string{"M", "N"}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("G", f, M, N), in("U", f, M, N), out("Y", f, M, N)}
	}},
	"rope": {dims: []string{"M", "N", "R"}, check: func(d map[string]int) error {
		if d["R"]%2 != 0 || d["R"] > d["N"] {
			//lint:ignore ST1005 a dimension's name is case-sensitive (K is not k)
			return fmt.Errorf("R=%d: want an even rotary width <= N=%d", d["R"], d["N"])
		}
		return nil
	}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), in("COS", f, M, d["R"]/2), in("SIN", f, M, d["R"]/2), out("Y", f, M, N)}
	}},
	"sum":       {dims: []string{"M", "N"}, sig: sigReduce},
	"max":       {dims: []string{"M", "N"}, sig: sigReduce},
	"softmax":   {dims: []string{"M", "N"}, sig: sigUnary},
	"rmsnorm":   {dims: []string{"M", "N"}, params: epsOnly, sig: sigRMSNorm},
	"layernorm": {dims: []string{"M", "N"}, params: epsOnly, sig: sigLayerNorm},
	"residual_layernorm": {dims: []string{"M", "N"}, params: epsOnly, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), in("R", f, M, N), in("W", f, N), in("B", f, N), out("Y", f, M, N), out("H", f, M, N)}
	}},
	"cross_entropy": {dims: []string{"M", "N"}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), in("T", "i64", M), out("L", f, M)}
	}},
	"scan_ordered": {dims: []string{"M", "N"}, sig: sigUnary},
	"scan":         {dims: []string{"M", "N"}, sig: sigUnary},
	"argmax": {dims: []string{"M", "N"}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), out("V", f, M), out("I", "i64", M)}
	}},
	"topk": {dims: []string{"M", "N", "K"}, ranking: true, check: func(d map[string]int) error {
		if d["K"] > d["N"] {
			//lint:ignore ST1005 a dimension's name is case-sensitive (K is not k)
			return fmt.Errorf("K=%d: want K <= N=%d", d["K"], d["N"])
		}
		return nil
	}, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), out("V", f, M, d["K"]), out("I", "i64", M, d["K"])}
	}},
	"sort": {dims: []string{"M", "N"}, ranking: true, sig: func(d map[string]int, f string) []Param {
		M, N := mn(d)
		return []Param{in("X", f, M, N), out("V", f, M, N), out("I", "i64", M, N)}
	}},
	"embedding": {dims: []string{"V", "D", "M"}, sig: func(d map[string]int, f string) []Param {
		return []Param{in("E", f, d["V"], d["D"]), in("I", "i64", d["M"]), out("Y", f, d["M"], d["D"])}
	}},
	"attention": {dims: []string{"B", "Hq", "Hkv", "Q", "K", "D", "Dv"}, check: func(d map[string]int) error {
		if d["Hq"]%d["Hkv"] != 0 {
			//lint:ignore ST1005 a dimension's name is case-sensitive (K is not k)
			return fmt.Errorf("Hq=%d: want a multiple of Hkv=%d (GQA/MQA)", d["Hq"], d["Hkv"])
		}
		if d["Q"] > d["K"] {
			//lint:ignore ST1005 a dimension's name is case-sensitive (K is not k)
			return fmt.Errorf("Q=%d: want Q <= K=%d (queries are the last Q key positions)", d["Q"], d["K"])
		}
		return nil
	}, terms: func(d map[string]int) int64 {
		return int64(d["B"]) * int64(d["Hq"]) * int64(d["Q"]) * int64(d["K"]) * int64(d["D"]+d["Dv"])
	}, sig: func(d map[string]int, f string) []Param {
		B, Hq, Hkv, Q, K := d["B"], d["Hq"], d["Hkv"], d["Q"], d["K"]
		return []Param{in("Q", f, B, Hq, Q, d["D"]), in("K", f, B, Hkv, K, d["D"]), in("V", f, B, Hkv, K, d["Dv"]), out("O", f, B, Hq, Q, d["Dv"])}
	}},
}

// epsOnly: the norms take their epsilon ([Case.Eps]) and nothing else.
var epsOnly = []string{"eps"}

func termsMNK(d map[string]int) int64 { return int64(d["M"]) * int64(d["N"]) * int64(d["K"]) }

func sigGemm(d map[string]int, f string) []Param {
	M, N, K := d["M"], d["N"], d["K"]
	return []Param{in("A", f, M, K), in("B", f, K, N), out("C", f, M, N)}
}

func sigBinary(d map[string]int, f string) []Param {
	M, N := mn(d)
	return []Param{in("A", f, M, N), in("B", f, M, N), out("C", f, M, N)}
}

func sigUnary(d map[string]int, f string) []Param {
	M, N := mn(d)
	return []Param{in("X", f, M, N), out("Y", f, M, N)}
}

func sigReduce(d map[string]int, f string) []Param {
	M, N := mn(d)
	return []Param{in("X", f, M, N), out("Y", f, M)}
}

func sigRMSNorm(d map[string]int, f string) []Param {
	M, N := mn(d)
	return []Param{in("X", f, M, N), in("W", f, N), out("Y", f, M, N)}
}

func sigLayerNorm(d map[string]int, f string) []Param {
	M, N := mn(d)
	return []Param{in("X", f, M, N), in("W", f, N), in("B", f, N), out("Y", f, M, N)}
}

// Ops lists the operators the oracle knows, sorted.
func Ops() []string {
	names := make([]string, 0, len(ops))
	for op := range ops {
		names = append(names, op)
	}
	sort.Strings(names)
	return names
}

// Dims lists the dimension names of op in their canonical order (nil for
// an unknown op).
func Dims(op string) []string { return append([]string(nil), ops[op].dims...) }

// Eps is the case's epsilon for the norms (params.eps, default 1e-5).
func (c Case) Eps() float64 {
	if e, ok := c.Params["eps"]; ok {
		return e
	}
	return 1e-5
}

// checkParams refuses a param op does not use, the first in name order.
func (spec opSpec) checkParams(c Case) error {
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		switch {
		case slices.Contains(spec.params, k):
		case len(spec.params) == 0:
			return fmt.Errorf("case %s: params.%s: op %s takes no parameters", c.ID, k, c.Op)
		default:
			return fmt.Errorf("case %s: params.%s: op %s takes only %s", c.ID, k, c.Op, strings.Join(spec.params, ", "))
		}
	}
	return nil
}

// Validate checks the case's op, dims, dtype, ranking, params and limits.
func (c Case) Validate() error {
	if c.ID == "" {
		return fmt.Errorf("case: id: want a non-empty id")
	}
	spec, ok := ops[c.Op]
	if !ok {
		return fmt.Errorf("case %s: op: unknown op %q (known: %v)", c.ID, c.Op, Ops())
	}
	names := spec.dims
	if len(c.Dims) != len(names) {
		return fmt.Errorf("case %s: dims: op %s wants exactly %v, got %v", c.ID, c.Op, names, c.Dims)
	}
	for _, n := range names {
		d, ok := c.Dims[n]
		if !ok {
			return fmt.Errorf("case %s: dims: missing %s (op %s wants %v)", c.ID, n, c.Op, names)
		}
		if d < 1 || d > MaxDim {
			return fmt.Errorf("case %s: dims: %s=%d outside [1, %d]", c.ID, n, d, MaxDim)
		}
	}
	if spec.check != nil {
		if err := spec.check(c.Dims); err != nil {
			return fmt.Errorf("case %s: dims: %w", c.ID, err)
		}
	}
	// Every op takes f16 and bf16 storage (FP32 arithmetic, each output
	// rounded once to storage: docs/oracle.md, "Storage dtypes").
	if c.Dtype != "f32" && c.Dtype != "f16" && c.Dtype != "bf16" {
		return fmt.Errorf("case %s: dtype: want f32, f16 or bf16, got %q", c.ID, c.Dtype)
	}
	switch {
	case c.Policy == PolicyStrict:
	case c.Policy == PolicyTF32 && tf32Ops[c.Op] && c.Dtype == "f32":
	case c.Policy == PolicyTF32:
		return fmt.Errorf("case %s: policy: tf32 applies to gemm, gemm_relu, gemm_gelu, bmm and gemv in f32 storage, not %s in %s", c.ID, c.Op, c.Dtype)
	default:
		return fmt.Errorf("case %s: policy: want %s or %s, got %q", c.ID, PolicyStrict, PolicyTF32, c.Policy)
	}
	switch {
	case spec.ranking && c.Ranking != RankingStable && c.Ranking != RankingStandard:
		return fmt.Errorf("case %s: ranking: op %s wants %q or %q, got %q", c.ID, c.Op, RankingStable, RankingStandard, c.Ranking)
	case !spec.ranking && c.Ranking != "":
		return fmt.Errorf("case %s: ranking: op %s has no ranking contract, got %q", c.ID, c.Op, c.Ranking)
	}
	if c.Device != "" && c.Device != DeviceCUDA {
		return fmt.Errorf("case %s: device: want %q or absent (the CPU), got %q", c.ID, DeviceCUDA, c.Device)
	}
	if !knownPattern(c.Pattern) {
		return fmt.Errorf("case %s: pattern: unknown pattern %q (known: %s)", c.ID, c.Pattern, strings.Join(Patterns(), ", "))
	}
	if c.Pattern == PatternExact && !(tf32Ops[c.Op] && c.Dtype == "f32") {
		return fmt.Errorf("case %s: pattern: exact is for gemm, gemm_relu, gemm_gelu, bmm and gemv in f32 storage, not %s in %s", c.ID, c.Op, c.Dtype)
	}
	if err := spec.checkParams(c); err != nil {
		return err
	}
	if e := c.Eps(); !(e > 0 && e < 1) {
		return fmt.Errorf("case %s: params.eps: want 0 < eps < 1, got %g", c.ID, e)
	}
	for _, p := range spec.sig(c.Dims, c.Dtype) {
		if p.Elems() > MaxElems {
			return fmt.Errorf("case %s: tensor %s has %d elements, limit %d", c.ID, p.Name, p.Elems(), MaxElems)
		}
	}
	if spec.terms != nil {
		if t := spec.terms(c.Dims); t > MaxTerms {
			return fmt.Errorf("case %s: %d product terms, limit %d (2^36)", c.ID, t, int64(MaxTerms))
		}
	}
	return nil
}

// SignatureOf is op's tensor list for dims and storage dtype without
// validating them (nil for an unknown op): what a route must take, also for
// cases a route is expected to refuse.
func SignatureOf(op string, dims map[string]int, dtype string) []Param {
	spec, ok := ops[op]
	if !ok {
		return nil
	}
	return spec.sig(dims, dtype)
}

// Signature is the ordered tensor list of c (see docs/protocol.md).
func Signature(c Case) ([]Param, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return ops[c.Op].sig(c.Dims, c.Dtype), nil
}
