package oracle

import (
	"fmt"
	"strings"
	"testing"
)

// TestPropertyTransformed runs the implementations on inputs the generator
// does not produce: the first input scaled or shifted, so that rows are
// ill-conditioned (a mean far from zero), exponents spread wide, or eps
// dominates. The bounds are derived for any finite input and must hold.
func TestPropertyTransformed(t *testing.T) {
	transforms := []struct {
		name string
		f    func(float32) float32
	}{
		{"x*2^-12", func(x float32) float32 { return x * 0x1p-12 }},
		{"x*2^-40", func(x float32) float32 { return x * 0x1p-40 }},
		{"x*16", func(x float32) float32 { return x * 16 }},
		{"x+100", func(x float32) float32 { return x + 100 }},
		{"x/16+3", func(x float32) float32 { return x/16 + 3 }},
	}
	shapes := map[string]map[string]int{
		"gemm":      {"M": 4, "N": 50, "K": 300},
		"sum":       {"M": 32, "N": 700},
		"softmax":   {"M": 8, "N": 700},
		"rmsnorm":   {"M": 8, "N": 700},
		"layernorm": {"M": 8, "N": 700},
	}
	for _, op := range []string{"gemm", "sum", "softmax", "rmsnorm", "layernorm"} {
		for _, tr := range transforms {
			for _, pattern := range patternsOf(op, "f32") {
				c := testCase(op, pattern, 11, shapes[op])
				t.Run(fmt.Sprintf("%s/%s/%s", op, tr.name, pattern), func(t *testing.T) {
					inT, err := Generate(c)
					if err != nil {
						t.Fatal(err)
					}
					in := f32s(inT)
					for i := range in[0] {
						in[0][i] = tr.f(in[0][i])
					}
					want, bound, err := refF(c, in)
					if err != nil {
						t.Fatal(err)
					}
					for _, im := range impls(op) {
						if (tr.name == "x+100" || pattern == "adversarial") && strings.HasSuffix(im.name, "noshift") {
							continue // exp(100) overflows binary32: a real failure of that variant
						}
						out := im.run(c, in)
						if v := compare(c, func() []Tensor { return tensors(in) }, exps(want, bound), tensors([][]float32{out})); !v.Pass {
							t.Errorf("Compare(%s %s, %s) = %q, want pass", c.ID, tr.name, im.name, v.Reason)
						}
					}
				})
			}
		}
	}
}
