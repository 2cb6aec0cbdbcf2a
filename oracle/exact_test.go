package oracle

import (
	"math"
	"strings"
	"testing"
)

// roundTo is x rounded to nearest even at bits significant bits: what
// TF32 (11) and BF16 (8) make of a binary32 input.
func roundTo(x float32, bits int) float32 {
	b := math.Float32bits(x)
	drop := uint(24 - bits)
	half, mask := uint32(1)<<(drop-1), uint32(1)<<drop-1
	low := b & mask
	b &^= mask
	if low > half || low == half && (b>>drop)&1 == 1 {
		b += 1 << drop
	}
	return math.Float32frombits(b)
}

// gemmAt is a K-term binary32 gemm in sequential order with every input
// rounded to bits significant bits first (24: none), B batches.
func gemmAt(B, M, N, K int, a, b []float32, bits int) []float32 {
	out := make([]float32, B*M*N)
	for z := range B {
		for i := range M {
			for j := range N {
				var s float32
				for k := range K {
					s += roundTo(a[z*M*K+i*K+k], bits) * roundTo(b[z*K*N+k*N+j], bits)
				}
				out[z*M*N+i*N+j] = s
			}
		}
	}
	return out
}

// TestExactPattern: on the exact pattern a strict f32 matrix case has one
// exact answer (bound 0 in every element while a dot product has at most
// ExactTerms nonzero terms), which a sequential binary32 evaluation gives
// and no TF32 or BF16 evaluation does, at every K, a 1x1 output included;
// on normal inputs TF32 passes the strict bound from K = 128 for a 1x1
// gemm and from K = 1536 for a 32x32 one, which is why a cohort refuses
// them for strict f32 matrix cases (cohort.Parse).
func TestExactPattern(t *testing.T) {
	for _, tc := range []struct {
		op         string
		B, M, N, K int
	}{
		{"gemm", 1, 1, 1, 128}, {"gemm", 1, 1, 1, 2048}, {"gemm", 1, 4, 3, 4096}, {"gemm", 1, 2, 2, 8192},
		{"gemm_relu", 1, 3, 5, 2048}, {"bmm", 2, 1, 2, 3000}, {"gemv", 1, 3, 1, 2816},
	} {
		dims := map[string]int{"M": tc.M, "N": tc.N, "K": tc.K}
		switch tc.op {
		case "bmm":
			dims["B"] = tc.B
		case "gemv":
			delete(dims, "N")
		}
		c := Case{ID: "x", Op: tc.op, Dims: dims, Dtype: "f32", Pattern: PatternExact, Policy: PolicyStrict, Seed: 5}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range in[0].F { // 12 significant bits, the last one set
			if roundTo(v, 11) == v || math.Abs(float64(v)) <= 0.5 || math.Abs(float64(v)) >= 1 {
				t.Fatalf("%s K=%d: A holds %g: want ±k/4096, k odd in [2049, 4095]", tc.op, tc.K, v)
			}
		}
		nonzero := 0
		for _, v := range in[1].F {
			if v != 0 && v != 1 && v != -1 {
				t.Fatalf("%s K=%d: B holds %g: want ±1 or 0", tc.op, tc.K, v)
			}
			if v != 0 {
				nonzero++
			}
		}
		if tc.K <= ExactTerms && nonzero != len(in[1].F) {
			t.Errorf("%s K=%d: %d of B's %d elements nonzero, want all (K <= %d)", tc.op, tc.K, nonzero, len(in[1].F), ExactTerms)
		}
		exp, err := Reference(c, in)
		if err != nil {
			t.Fatal(err)
		}
		zero := 0
		for _, b := range exp[0].Bound {
			if b == 0 {
				zero++
			}
		}
		if zero != len(exp[0].Bound) {
			t.Errorf("%s K=%d: %d of %d bounds 0, want all", tc.op, tc.K, zero, len(exp[0].Bound))
		}
		N := tc.N
		if tc.op == "gemv" {
			N = 1
		}
		for _, p := range []struct {
			name string
			bits int
			pass bool
		}{{"binary32", 24, true}, {"TF32", 11, false}, {"BF16", 8, false}} {
			out := gemmAt(tc.B, tc.M, N, tc.K, in[0].F, in[1].F, p.bits)
			if tc.op == "gemm_relu" { // relu(0.125·(A·B) + 0.25)
				for i := range out {
					out[i] = max(0.125*out[i]+0.25, 0)
				}
			}
			v := Compare(c, exp, []Tensor{{Dtype: "f32", F: out}})
			if v.Pass != p.pass || !p.pass && !strings.HasPrefix(v.Reason, "bound: ") && !strings.HasPrefix(v.Reason, "bits: ") {
				t.Errorf("%s %dx%dx%d K=%d in %s: pass %v (%s), want %v", tc.op, tc.B, tc.M, N, tc.K, p.name, v.Pass, v.Reason, p.pass)
			}
		}
	}
	// Why the rule: TF32 passes the strict bound on normal inputs.
	for _, tc := range []struct {
		M, K int
		seed uint64
	}{{1, 128, 17}, {32, 1536, 1}} {
		c := Case{ID: "x", Op: "gemm", Dims: map[string]int{"M": tc.M, "N": tc.M, "K": tc.K}, Dtype: "f32", Pattern: "normal", Policy: PolicyStrict, Seed: tc.seed}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Check(c, []Tensor{{Dtype: "f32", F: gemmAt(1, tc.M, tc.M, tc.K, in[0].F, in[1].F, 11)}})
		if err != nil || !v.Pass {
			t.Errorf("normal %dx%dx%d in TF32: %+v %v, want it to pass the strict bound (the reason strict f32 matrix cases take the exact pattern)", tc.M, tc.M, tc.K, v, err)
		}
	}
}
