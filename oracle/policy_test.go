package oracle

import (
	"math"
	"strings"
	"testing"
)

// toTF32 converts x to TF32 (10 explicit mantissa bits) by truncation, as
// tensor cores read FP32 registers, or to nearest, ties away (cvt.rna).
func toTF32(x float32, trunc bool) float32 {
	b := math.Float32bits(x)
	if !trunc {
		b += 0x1000
	}
	return math.Float32frombits(b &^ 0x1fff)
}

// tf32Gemm is C = A·B with the inputs converted to TF32 and the products
// summed in binary32 in order.
func tf32Gemm(M, N, K int, a, b []float32, trunc bool) []float32 {
	c := make([]float32, M*N)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var acc float32
			for k := 0; k < K; k++ {
				acc += float32(toTF32(a[i*K+k], trunc) * toTF32(b[k*N+j], trunc))
			}
			c[i*N+j] = acc
		}
	}
	return c
}

// TestTF32Policy: a TF32 gemm (truncated or rounded inputs) passes the tf32
// envelope and fails strict; an error just above the tf32 bound fails it.
func TestTF32Policy(t *testing.T) {
	worst := 0.0
	for _, op := range []string{"gemm", "bmm", "gemv"} {
		for _, trunc := range []bool{true, false} {
			for seed := uint64(1); seed <= 3; seed++ {
				c := testCase(op, "normal", seed, map[string]int{"M": 8, "N": 40, "K": 300})
				if op == "bmm" {
					c.Dims = map[string]int{"B": 2, "M": 8, "N": 40, "K": 300}
				}
				if op == "gemv" {
					c.Dims = map[string]int{"M": 40, "K": 300}
				}
				in, err := Generate(c)
				if err != nil {
					t.Fatal(err)
				}
				var out []float32
				switch op {
				case "gemm":
					out = tf32Gemm(8, 40, 300, in[0].F, in[1].F, trunc)
				case "bmm":
					for b := 0; b < 2; b++ {
						out = append(out, tf32Gemm(8, 40, 300, in[0].F[b*8*300:(b+1)*8*300], in[1].F[b*300*40:(b+1)*300*40], trunc)...)
					}
				case "gemv":
					out = tf32Gemm(40, 1, 300, in[0].F, in[1].F, trunc)
				}
				strict, err := Reference(c, in)
				if err != nil {
					t.Fatal(err)
				}
				if v := Compare(c, strict, []Tensor{F32(out)}); v.Pass || !strings.HasPrefix(v.Reason, "bound: ") {
					t.Errorf("%s trunc=%v seed %d: strict verdict %+v, want a bound failure (TF32 is not strict)", op, trunc, seed, v)
				}
				c.Policy = PolicyTF32
				relaxed, err := Reference(c, in)
				if err != nil {
					t.Fatal(err)
				}
				v := Compare(c, relaxed, []Tensor{F32(out)})
				if !v.Pass {
					t.Errorf("%s trunc=%v seed %d: tf32 verdict %q, want pass", op, trunc, seed, v.Reason)
				}
				worst = max(worst, v.MaxRatio)

				bad := append([]float32(nil), out...)
				e := relaxed[0]
				bad[3] = float32(e.Want[3] + 1.01*e.Bound[3])
				if v := Compare(c, relaxed, []Tensor{F32(bad)}); v.Pass || !strings.HasPrefix(v.Reason, "bound: ") || !strings.Contains(v.Reason, "[3] = ") {
					t.Errorf("%s: an error 1.01x the tf32 bound at element 3: verdict %+v, want a bound failure there", op, v)
				}
			}
		}
	}
	t.Logf("tf32: largest |got-want|/bound over gemm, bmm, gemv (K=300, normal, truncated and rounded inputs): %.3g", worst)
}
