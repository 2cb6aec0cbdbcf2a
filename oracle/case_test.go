package oracle

import (
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
	for _, tc := range []struct {
		name string
		c    Case
		want string
	}{
		{"valid", ok, ""},
		{"no id", with(func(c *Case) { c.ID = "" }), "case: id: want a non-empty id"},
		{"unknown op", with(func(c *Case) { c.Op = "conv" }),
			`case x: op: unknown op "conv" (known: [add gemm layernorm rmsnorm softmax sum])`},
		{"too few dims", with(func(c *Case) { delete(c.Dims, "K") }),
			"case x: dims: op gemm wants exactly [M N K], got map[M:4 N:4]"},
		{"missing dim", with(func(c *Case) { delete(c.Dims, "K"); c.Dims["L"] = 4 }),
			"case x: dims: missing K (op gemm wants [M N K])"},
		{"dim too large", with(func(c *Case) { c.Dims["M"] = 16385 }),
			"case x: dims: M=16385 outside [1, 16384]"},
		{"dim zero", with(func(c *Case) { c.Dims["N"] = 0 }),
			"case x: dims: N=0 outside [1, 16384]"},
		{"too many elements", with(func(c *Case) { c.Dims["M"] = 16384; c.Dims["K"] = 16384 }),
			"case x: tensor A has 268435456 elements, limit 16777216"},
		{"dtype", with(func(c *Case) { c.Dtype = "f16" }), `case x: dtype: want f32, got "f16"`},
		{"policy", with(func(c *Case) { c.Policy = "tf32" }), `case x: policy: want strict, got "tf32"`},
		{"pattern", with(func(c *Case) { c.Pattern = "ties" }), `case x: pattern: unknown pattern "ties"`},
		{"eps", with(func(c *Case) { c.Params = map[string]float64{"eps": 0} }), "case x: params.eps: want 0 < eps < 1, got 0"},
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
