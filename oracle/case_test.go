package oracle

import (
	"math"
	"reflect"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := Case{ID: "x", Op: "gemm", Dims: map[string]int{"M": 4, "N": 4, "K": 4}, Dtype: "f32", Pattern: "normal", Seed: 1, Policy: "strict"}
	with := func(f func(*Case)) Case {
		c := ok
		c.Dims = map[string]int{"M": 4, "N": 4, "K": 4}
		f(&c)
		return c
	}
	norm := func(op string, params map[string]float64) Case {
		return Case{ID: "x", Op: op, Dims: map[string]int{"M": 2, "N": 8}, Dtype: "f32", Pattern: "normal", Policy: "strict", Params: params}
	}
	for _, tc := range []struct {
		name string
		c    Case
		want string
	}{
		{"valid", ok, ""},
		{"no id", with(func(c *Case) { c.ID = "" }), "case: id: want a non-empty id"},
		{"unknown op", with(func(c *Case) { c.Op = "conv" }),
			`case x: op: unknown op "conv" (known: [add argmax attention bmm cross_entropy embedding gelu_add gelu_pair gemm gemm_gelu gemm_relu gemv layernorm max residual_layernorm rmsnorm rope scan scan_ordered sigmoid_pair softmax sort sum swiglu topk])`},
		{"too few dims", with(func(c *Case) { delete(c.Dims, "K") }),
			"case x: dims: op gemm wants exactly [M N K], got map[M:4 N:4]"},
		{"missing dim", with(func(c *Case) { delete(c.Dims, "K"); c.Dims["L"] = 4 }),
			"case x: dims: missing K (op gemm wants [M N K])"},
		{"dim too large", with(func(c *Case) { c.Dims["M"] = 16385 }),
			"case x: dims: M=16385 outside [1, 16384]"},
		{"dim zero", with(func(c *Case) { c.Dims["N"] = 0 }),
			"case x: dims: N=0 outside [1, 16384]"},
		{"too many elements", Case{ID: "x", Op: "bmm", Dims: map[string]int{"B": 2, "M": 16384, "N": 1, "K": 16384}, Dtype: "f32", Pattern: "normal", Policy: "strict"},
			"case x: tensor A has 536870912 elements, limit 268435456"},
		{"dtype", with(func(c *Case) { c.Dtype = "f64" }), `case x: dtype: want f32, f16 or bf16, got "f64"`},
		{"ranking missing", func() Case {
			c := with(func(c *Case) {})
			c.Op = "topk"
			return c
		}(), `case x: ranking: op topk wants "stable" or "standard", got ""`},
		{"ranking extra", with(func(c *Case) { c.Ranking = "stable" }), `case x: ranking: op gemm has no ranking contract, got "stable"`},
		{"topk K > N", func() Case {
			c := with(func(c *Case) { c.Dims["K"] = 5 })
			c.Op, c.Ranking = "topk", "stable"
			return c
		}(), "case x: dims: K=5: want K <= N=4"},
		{"rope odd R", Case{ID: "x", Op: "rope", Dims: map[string]int{"M": 2, "N": 8, "R": 3}, Dtype: "f32", Pattern: "normal", Policy: "strict"},
			"case x: dims: R=3: want an even rotary width <= N=8"},
		{"attention GQA", Case{ID: "x", Op: "attention", Dims: map[string]int{"B": 1, "Hq": 3, "Hkv": 2, "Q": 1, "K": 4, "D": 8, "Dv": 8}, Dtype: "f32", Pattern: "normal", Policy: "strict"},
			"case x: dims: Hq=3: want a multiple of Hkv=2 (GQA/MQA)"},
		{"attention Q > K", Case{ID: "x", Op: "attention", Dims: map[string]int{"B": 1, "Hq": 2, "Hkv": 2, "Q": 5, "K": 4, "D": 8, "Dv": 8}, Dtype: "f32", Pattern: "normal", Policy: "strict"},
			"case x: dims: Q=5: want Q <= K=4 (queries are the last Q key positions)"},
		{"terms", with(func(c *Case) { c.Dims = map[string]int{"M": 8192, "N": 4096, "K": 4096} }),
			"case x: 137438953472 product terms, limit 68719476736 (2^36)"},
		{"policy", with(func(c *Case) { c.Policy = "fast-math" }), `case x: policy: want strict or tf32, got "fast-math"`},
		{"tf32 op", Case{ID: "x", Op: "softmax", Dims: map[string]int{"M": 4, "N": 4}, Dtype: "f32", Pattern: "normal", Policy: "tf32"},
			"case x: policy: tf32 applies to gemm, gemm_relu, gemm_gelu, bmm and gemv in f32 storage, not softmax in f32"},
		{"tf32 dtype", with(func(c *Case) { c.Policy, c.Dtype = "tf32", "bf16" }),
			"case x: policy: tf32 applies to gemm, gemm_relu, gemm_gelu, bmm and gemv in f32 storage, not gemm in bf16"},
		{"pattern", with(func(c *Case) { c.Pattern = "uniform" }), `case x: pattern: unknown pattern "uniform" (known: normal, dyadic, ties, adversarial, exact)`},
		{"eps", norm("rmsnorm", map[string]float64{"eps": 0}), "case x: params.eps: want 0 < eps < 1, got 0"},
		{"eps 1", norm("layernorm", map[string]float64{"eps": 1}), "case x: params.eps: want 0 < eps < 1, got 1"},
		{"eps NaN", norm("rmsnorm", map[string]float64{"eps": math.NaN()}), "case x: params.eps: want 0 < eps < 1, got NaN"},
		{"eps kept", norm("residual_layernorm", map[string]float64{"eps": 1e-6}), ""},
		{"param on an op without params", with(func(c *Case) { c.Params = map[string]float64{"alpha": 2} }),
			"case x: params.alpha: op gemm takes no parameters"},
		{"eps on an op without params", with(func(c *Case) { c.Params = map[string]float64{"eps": 1e-5} }),
			"case x: params.eps: op gemm takes no parameters"},
		{"unknown param on a norm", norm("layernorm", map[string]float64{"eps": 1e-5, "alpha": 2}),
			"case x: params.alpha: op layernorm takes only eps"},
		{"first unknown param in name order", norm("rmsnorm", map[string]float64{"zeta": 1, "beta": 1}),
			"case x: params.beta: op rmsnorm takes only eps"},
		{"device cuda", with(func(c *Case) { c.Device = DeviceCUDA }), ""},
		{"device cpu spelled out", with(func(c *Case) { c.Device = "cpu" }), `case x: device: want "cuda" or absent (the CPU), got "cpu"`},
		{"device unknown", with(func(c *Case) { c.Device = "tpu" }), `case x: device: want "cuda" or absent (the CPU), got "tpu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate(%+v) = %q, want %q", tc.c, got, tc.want)
			}
		})
	}
}

func TestSignature(t *testing.T) {
	c := Case{ID: "ln", Op: "layernorm", Dims: map[string]int{"M": 3, "N": 5}, Dtype: "f32", Pattern: "dyadic", Policy: "strict"}
	got, err := Signature(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{"X", "input", "f32", []int{3, 5}},
		{"W", "input", "f32", []int{5}},
		{"B", "input", "f32", []int{5}},
		{"Y", "output", "f32", []int{3, 5}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Signature(%s) = %v, want %v", c.ID, got, want)
	}
}
