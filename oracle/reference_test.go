package oracle

import (
	"math"
	"testing"
	"time"
)

// TestReferenceValues checks the expected values on hand-computed inputs.
func TestReferenceValues(t *testing.T) {
	ln2 := float32(math.Ln2)
	for _, tc := range []struct {
		op   string
		dims map[string]int
		in   [][]float32
		want []float64
	}{
		{"gemm", map[string]int{"M": 2, "N": 2, "K": 3},
			[][]float32{{1, 2, 3, 4, 5, 6}, {1, 0, 0, 1, 1, 1}}, []float64{4, 5, 10, 11}},
		{"add", map[string]int{"M": 1, "N": 3}, [][]float32{{1, 2, 3}, {0.5, -2, 1e-8}}, []float64{1.5, 0, 3 + float64(float32(1e-8))}},
		{"sum", map[string]int{"M": 2, "N": 2}, [][]float32{{1, 2, -3, 0.25}}, []float64{3, -2.75}},
		{"softmax", map[string]int{"M": 1, "N": 2}, [][]float32{{0, ln2}},
			[]float64{1 / (1 + math.Exp(float64(ln2))), math.Exp(float64(ln2)) / (1 + math.Exp(float64(ln2)))}},
		{"rmsnorm", map[string]int{"M": 1, "N": 2}, [][]float32{{3, 4}, {1, 2}},
			[]float64{3 / math.Sqrt(12.5+1e-5), 8 / math.Sqrt(12.5+1e-5)}},
		{"layernorm", map[string]int{"M": 1, "N": 2}, [][]float32{{1, 3}, {2, 1}, {0, 10}},
			[]float64{-2 / math.Sqrt(1+1e-5), 10 + 1/math.Sqrt(1+1e-5)}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			c := testCase(tc.op, "normal", 1, tc.dims)
			want, bound, err := refF(c, tc.in)
			if err != nil {
				t.Fatalf("Reference(%s) error %v", c.ID, err)
			}
			for i, w := range tc.want {
				if got := want[0][i]; math.Abs(got-w) > 1e-15*math.Abs(w) {
					t.Errorf("Reference(%s)[%d] = %.17g, want %.17g", c.ID, i, got, w)
				}
				if b := bound[0][i]; !(b >= 0) || b > 1e-4*math.Abs(w)+1e-30 {
					t.Errorf("Reference(%s) bound[%d] = %g, want in [0, 1e-4*|%g|]", c.ID, i, b, w)
				}
			}
		})
	}
}

// TestReferenceBounds pins bound formulas on inputs small enough to do by
// hand (docs/oracle.md).
func TestReferenceBounds(t *testing.T) {
	const u = 0x1p-24
	third := float32(1.0 / 3)
	for _, tc := range []struct {
		name string
		op   string
		dims map[string]int
		in   [][]float32
		want float64 // bound of element 0
	}{
		// One product, not representable: one rounding of |a*b|.
		{"gemm K=1", "gemm", map[string]int{"M": 1, "N": 1, "K": 1}, [][]float32{{third}, {third}},
			u * (1 + u) * float64(third) * float64(third) * slack},
		// Exact products and sums of dyadic grains: no rounding at all.
		{"gemm exact", "gemm", map[string]int{"M": 1, "N": 1, "K": 2}, [][]float32{{0.5, 0.25}, {3, -1}}, 0},
		// Two terms of magnitude 1/3 with sum 2/3: n-1 = 1 addition whose
		// partial sum is at most (s+|y|)/2 = 2/3 plus gamma_1 * s.
		{"sum refined", "sum", map[string]int{"M": 1, "N": 2}, [][]float32{{third, third}},
			func() float64 {
				s := 2 * float64(third)
				return math.Min(gamma(1)*s, u*(s+gamma(1)*s)) * slack
			}()},
		{"add rounded", "add", map[string]int{"M": 1, "N": 1}, [][]float32{{1}, {0x1p-30}}, u * (1 + 0x1p-30) * slack},
		{"add exact", "add", map[string]int{"M": 1, "N": 1}, [][]float32{{1}, {0x1p-20}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCase(tc.op, "normal", 1, tc.dims)
			_, bound, err := refF(c, tc.in)
			if err != nil {
				t.Fatalf("Reference(%s) error %v", c.ID, err)
			}
			if got := bound[0][0]; math.Abs(got-tc.want) > 1e-12*tc.want {
				t.Errorf("Reference(%s, %v) bound = %.17g, want %.17g", c.ID, tc.in, got, tc.want)
			}
		})
	}
}

// TestExactDyadic: for dyadic inputs gemm, sum and add are exact in any
// order, so the bound is zero and every implementation matches exactly.
func TestExactDyadic(t *testing.T) {
	for _, tc := range []struct {
		op   string
		dims map[string]int
	}{
		{"gemm", map[string]int{"M": 4, "N": 100, "K": 512}},
		{"sum", map[string]int{"M": 8, "N": 4096}},
		{"add", map[string]int{"M": 8, "N": 100}},
	} {
		c := testCase(tc.op, "dyadic", 3, tc.dims)
		inT, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		in := f32s(inT)
		want, bound, err := refF(c, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bound[0] {
			if b != 0 {
				t.Fatalf("Reference(%s) bound[%d] = %g, want 0", c.ID, i, b)
			}
		}
		for _, im := range impls(tc.op) {
			out := im.run(c, in)
			for i, g := range out {
				if float64(g) != want[0][i] {
					t.Fatalf("%s(%s)[%d] = %v, want %v exactly", im.name, c.ID, i, g, want[0][i])
				}
			}
		}
	}
}

func TestReferenceErrors(t *testing.T) {
	c := testCase("add", "normal", 1, map[string]int{"M": 1, "N": 2})
	for _, tc := range []struct {
		name string
		in   [][]float32
		want string
	}{
		{"count", [][]float32{{1, 2}}, "case add-M=1-N=2-normal-1: reference: got 1 inputs, want 2"},
		{"length", [][]float32{{1, 2}, {1}}, "case add-M=1-N=2-normal-1: reference: input B has 1 elements, want 2"},
		{"nan", [][]float32{{1, 2}, {1, nan32}}, "case add-M=1-N=2-normal-1: reference: input B[1] = NaN, want a finite value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := refF(c, tc.in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Reference(%s, %v) error = %v, want %s", c.ID, tc.in, err, tc.want)
			}
		})
	}
}

// TestReferenceLarge times the reference at the sizes the brief names:
// gemm 512^3 and 2^24-element rows.
func TestReferenceLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("long: make test runs it")
	}
	if testing.Short() {
		t.Skip("large references take seconds")
	}
	for _, tc := range []struct {
		op   string
		dims map[string]int
	}{
		{"gemm", map[string]int{"M": 512, "N": 512, "K": 512}},
		{"softmax", map[string]int{"M": 4096, "N": 4096}},
	} {
		c := testCase(tc.op, "normal", 1, tc.dims)
		start := time.Now()
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		gen := time.Since(start)
		want, err := Reference(c, in)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: Generate %v, Reference %v (%d outputs)", c.ID, gen, time.Since(start)-gen, len(want[0].Want))
	}
}

func BenchmarkReferenceGemm512(b *testing.B) {
	c := testCase("gemm", "normal", 1, map[string]int{"M": 512, "N": 512, "K": 512})
	in, err := Generate(c)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Reference(c, in); err != nil {
			b.Fatal(err)
		}
	}
}
