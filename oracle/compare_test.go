package oracle

import (
	"fmt"
	"math"
	"testing"
)

var nan32 = float32(math.NaN())

// TestCompareReasons pins every verdict line on hand-made references.
func TestCompareReasons(t *testing.T) {
	c := Case{ID: "add-1x4", Op: "add", Dims: map[string]int{"M": 1, "N": 4}, Dtype: "f32", Pattern: "dyadic", Seed: 1, Policy: "strict"}
	want := [][]float64{{1, 2, 3, 4}}
	exact := [][]float64{{0, 0, 0, 0}}
	for _, tc := range []struct {
		name   string
		want   [][]float64
		bound  [][]float64
		out    [][]float32
		reason string
		index  int
	}{
		{"pass", want, exact, [][]float32{{1, 2, 3, 4}}, "", -1},
		{"bound", want, [][]float64{{0, 0.25, 0, 0.5}}, [][]float32{{1, 2.5, 3, 5}},
			"bound: C[1] = 2.5, want 2 ± 0.25 (2 of 4 elements outside)", 1},
		{"bound small", want, [][]float64{{3e-7, 3e-7, 3e-7, 3e-7}}, [][]float32{{1, 2, 3, 4.0000005}},
			"bound: C[3] = 4.0000005, want 4 ± 3e-07 (1 of 4 elements outside)", 3},
		{"bound exact", want, exact, [][]float32{{1, 2, 3, math.Nextafter32(4, 5)}},
			"bound: C[3] = 4.0000005, want 4 ± 0 (1 of 4 elements outside)", 3},
		{"nan", want, exact, [][]float32{{1, nan32, 3, 4}}, "nan: C[1] is NaN, want 2", 1},
		{"nan before bound", want, exact, [][]float32{{1, 2.5, nan32, 4}}, "nan: C[2] is NaN, want 3", 2},
		{"inf", want, exact, [][]float32{{1, 2, float32(math.Inf(1)), 4}}, "nonfinite: C[2] = +Inf, want 3", 2},
		{"-inf", want, exact, [][]float32{{float32(math.Inf(-1)), 2, 3, 4}}, "nonfinite: C[0] = -Inf, want 1", 0},
		{"zeros", want, exact, [][]float32{{0, 0, 0, 0}}, "trivial: C is all zeros", 0},
		{"negative zeros", want, exact, [][]float32{{0, float32(math.Copysign(0, -1)), 0, 0}}, "trivial: C is all zeros", 0},
		{"zeros fit", [][]float64{{0, 0, 1e-9, 0}}, [][]float64{{0, 0, 1e-8, 0}}, [][]float32{{0, 0, 0, 0}}, "", -1},
		{"constant", want, exact, [][]float32{{2.5, 2.5, 2.5, 2.5}}, "trivial: C is constant 2.5", 0},
		{"constant fits", [][]float64{{1, 1, 1, 1}}, exact, [][]float32{{1, 1, 1, 1}}, "", -1},
		{"length", want, exact, [][]float32{{1, 2, 3}}, "length: C has 3 elements, want 4", -1},
		{"outputs", want, exact, [][]float32{{1, 2, 3, 4}, {1}}, "outputs: got 2 tensors, want 1", -1},
		{"reference", [][]float64{{1, 2}}, exact, [][]float32{{1, 2, 3, 4}}, "reference: C has 2 expected and 4 bound elements, want 4", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := cmpF(c, tc.want, tc.bound, tc.out)
			if v.Reason != tc.reason || v.Pass != (tc.reason == "") || v.Index != tc.index {
				t.Errorf("Compare(%v) = %v, %q, index %d, want %v, %q, index %d",
					tc.out, v.Pass, v.Reason, v.Index, tc.reason == "", tc.reason, tc.index)
			}
		})
	}
}

func TestCompareFields(t *testing.T) {
	c := Case{ID: "add-1x4", Op: "add", Dims: map[string]int{"M": 1, "N": 4}, Dtype: "f32", Pattern: "dyadic", Seed: 1, Policy: "strict"}
	v := cmpF(c, [][]float64{{1, 2, 3, 4}}, [][]float64{{1, 1, 0.5, 0.5}}, [][]float32{{1.5, 2, 4, 4.25}})
	want := Verdict{Pass: false, Reason: "bound: C[2] = 4, want 3 ± 0.5 (1 of 4 elements outside)",
		Output: "C", Index: 2, Got: 4, Want: 3, Bound: 0.5, MaxRatio: 2, Checked: 4}
	if v != want {
		t.Errorf("Compare = %+v, want %+v", v, want)
	}
	v = cmpF(c, [][]float64{{1, 2, 3, 4}}, [][]float64{{1, 1, 0.5, 0.5}}, [][]float32{{1.5, 2, 3, 4.25}})
	want = Verdict{Pass: true, Index: -1, MaxRatio: 0.5, Checked: 4}
	if v != want {
		t.Errorf("Compare = %+v, want %+v", v, want)
	}
}

// propertyCase returns a case of op with its inputs, reference and a
// passing binary32 output from the first implementation.
func propertyCase(t *testing.T, op string, dims map[string]int) (Case, [][]float32, [][]float64, [][]float64, []float32) {
	t.Helper()
	c := testCase(op, "normal", 5, dims)
	inT, err := Generate(c)
	if err != nil {
		t.Fatalf("Generate(%s) error %v", c.ID, err)
	}
	in := f32s(inT)
	want, bound, err := refF(c, in)
	if err != nil {
		t.Fatalf("Reference(%s) error %v", c.ID, err)
	}
	out := impls(op)[0].run(c, in)
	if v := cmpF(c, want, bound, [][]float32{out}); !v.Pass {
		t.Fatalf("Compare(%s, %s) = %q, want pass", c.ID, impls(op)[0].name, v.Reason)
	}
	return c, in, want, bound, out
}

var perturbShapes = map[string]map[string]int{
	"gemm":      {"M": 16, "N": 16, "K": 16},
	"add":       {"M": 5, "N": 100},
	"sum":       {"M": 20, "N": 300},
	"softmax":   {"M": 5, "N": 100},
	"rmsnorm":   {"M": 5, "N": 100},
	"layernorm": {"M": 5, "N": 100},
}

// outside returns the binary32 value nearest to want + dir*1.01*bound that
// is strictly outside want ± bound; inside, the nearest one inside.
func outside(want, bound float64, dir float64) float32 {
	f := float32(want + dir*1.01*bound)
	for math.Abs(float64(f)-want) <= bound {
		f = math.Nextafter32(f, float32(dir*math.Inf(1)))
	}
	return f
}

func inside(want, bound float64, dir float64) float32 {
	f := float32(want + dir*0.99*bound)
	for math.Abs(float64(f)-want) > bound {
		f = math.Nextafter32(f, float32(want))
	}
	return f
}

// TestPerturb moves one element of a passing output just outside its bound
// and checks that Compare fails there with the exact reason; just inside,
// it must still pass.
func TestPerturb(t *testing.T) {
	for _, op := range []string{"add", "gemm", "layernorm", "rmsnorm", "softmax", "sum"} {
		t.Run(op, func(t *testing.T) {
			c, _, want, bound, out := propertyCase(t, op, perturbShapes[op])
			name := outputName(t, c)
			n := len(out)
			for _, i := range []int{0, n / 2, n - 1} {
				for _, dir := range []float64{1, -1} {
					w, b := want[0][i], bound[0][i]
					bad := append([]float32(nil), out...)
					bad[i] = outside(w, b, dir)
					v := cmpF(c, want, bound, [][]float32{bad})
					reason := fmt.Sprintf("bound: %s[%d] = %s, want %s ± %s (1 of %d elements outside)",
						name, i, fmtGot(bad[i]), fmtWant(w), fmtBound(b), n)
					if v.Pass || v.Reason != reason || v.Index != i || v.Output != name {
						t.Errorf("Compare(%s with %s[%d] = %v) = %v, %q, want fail, %q", c.ID, name, i, bad[i], v.Pass, v.Reason, reason)
					}
					if v.MaxRatio <= 1 {
						t.Errorf("Compare(%s with %s[%d] outside).MaxRatio = %g, want > 1", c.ID, name, i, v.MaxRatio)
					}
					good := append([]float32(nil), out...)
					good[i] = inside(w, b, dir)
					if v := cmpF(c, want, bound, [][]float32{good}); !v.Pass {
						t.Errorf("Compare(%s with %s[%d] = %v, inside) = %q, want pass", c.ID, name, i, good[i], v.Reason)
					}
				}
			}
		})
	}
}

// outputName returns the name of c's only output.
func outputName(t *testing.T, c Case) string {
	t.Helper()
	sig, err := Signature(c)
	if err != nil {
		t.Fatal(err)
	}
	return sig[len(sig)-1].Name
}

// TestTrivialOutputs feeds each op the outputs of a kernel that skipped
// its work and checks the exact reason.
func TestTrivialOutputs(t *testing.T) {
	poison := math.Float32frombits(0x7FC0DEAD)
	for _, op := range []string{"add", "gemm", "layernorm", "rmsnorm", "softmax", "sum"} {
		dims := perturbShapes[op]
		if op == "gemm" {
			dims = map[string]int{"M": 16, "N": 16, "K": 16} // A, B and C alike in size
		}
		t.Run(op, func(t *testing.T) {
			c, in, want, bound, out := propertyCase(t, op, dims)
			name := outputName(t, c)
			sig, _ := Signature(c)
			fill := func(v float32) []float32 {
				x := make([]float32, len(out))
				for i := range x {
					x[i] = v
				}
				return x
			}
			nanAt := append([]float32(nil), out...)
			nanAt[3] = nan32
			cases := []struct {
				name   string
				out    []float32
				reason string
			}{
				{"zeros", fill(0), fmt.Sprintf("trivial: %s is all zeros", name)},
				{"constant", fill(0.5), fmt.Sprintf("trivial: %s is constant 0.5", name)},
				{"poison", fill(poison), fmt.Sprintf("nan: %s[0] is NaN, want %s", name, fmtWant(want[0][0]))},
				{"nan", nanAt, fmt.Sprintf("nan: %s[3] is NaN, want %s", name, fmtWant(want[0][3]))},
			}
			for k, p := range sig {
				if p.Role == "input" && p.Elems() == len(out) {
					cases = append(cases, struct {
						name   string
						out    []float32
						reason string
					}{"copy " + p.Name, append([]float32(nil), in[k]...), fmt.Sprintf("trivial: %s is a copy of input %s", name, p.Name)})
				}
			}
			for _, tc := range cases {
				v := cmpF(c, want, bound, [][]float32{tc.out})
				if v.Pass || v.Reason != tc.reason {
					t.Errorf("Compare(%s, %s output) = %v, %q, want fail, %q", c.ID, tc.name, v.Pass, v.Reason, tc.reason)
				}
				cv, err := checkF(c, [][]float32{tc.out})
				if err != nil || cv.Reason != v.Reason || cv.Index != v.Index { // Got may be NaN
					t.Errorf("Check(%s, %s output) = %q, %v, want %q", c.ID, tc.name, cv.Reason, err, v.Reason)
				}
			}
		})
	}
}

// TestTrivialThatFits checks that a constant or a copy that the reference
// allows is not rejected: softmax of width one is 1 everywhere.
func TestTrivialThatFits(t *testing.T) {
	c := testCase("softmax", "normal", 1, map[string]int{"M": 8, "N": 1})
	out := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	if v, err := checkF(c, [][]float32{out}); err != nil || !v.Pass {
		t.Errorf("Check(%s, all ones) = %+v, %v, want pass", c.ID, v, err)
	}
}

func TestCheck(t *testing.T) {
	for op := range perturbShapes {
		c := testCase(op, "dyadic", 9, perturbShapes[op])
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		out := impls(op)[0].outputs(c, in)
		v, err := Check(c, out)
		if err != nil || !v.Pass || v.Checked != out[0].Len() {
			t.Errorf("Check(%s) = %+v, %v, want pass over %d elements", c.ID, v, err, out[0].Len())
		}
	}
	bad := testCase("gemm", "normal", 1, map[string]int{"M": 1})
	if _, err := Check(bad, nil); err == nil {
		t.Errorf("Check(%s with dims M only) error = nil, want an error", bad.ID)
	}
}

func TestCompareInvalidCase(t *testing.T) {
	c := Case{ID: "x", Op: "conv", Dims: map[string]int{"M": 1}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	v := Compare(c, nil, nil)
	if want := `case x: op: unknown op "conv" (known: [add argmax attention bmm cross_entropy embedding gelu_add gelu_pair gemm gemm_gelu gemm_relu gemv layernorm max residual_layernorm rmsnorm rope scan scan_ordered sigmoid_pair softmax sort sum swiglu topk])`; v.Pass || v.Reason != want {
		t.Errorf("Compare(%+v) = %v, %q, want fail, %q", c, v.Pass, v.Reason, want)
	}
}
