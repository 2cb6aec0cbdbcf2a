package floors

import (
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

func TestMinBytes(t *testing.T) {
	for _, tc := range []struct {
		c    oracle.Case
		want int
	}{
		// Every tensor once: A, B and C of a 4x4x4 gemm.
		{oracle.Case{ID: "g", Op: "gemm", Dims: map[string]int{"M": 4, "N": 4, "K": 4}, Dtype: "f32", Pattern: "normal", Policy: "strict"}, 3 * 64},
		// A gather reads M rows of the table, not the table: ids 8 x 8 B,
		// rows 8 x 16 x 4 B, output the same again.
		{oracle.Case{ID: "e", Op: "embedding", Dims: map[string]int{"V": 1000, "D": 16, "M": 8}, Dtype: "f32", Pattern: "normal", Policy: "strict"}, 64 + 512 + 512},
	} {
		sig, err := oracle.Signature(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if got := MinBytes(tc.c, sig); got != tc.want {
			t.Errorf("MinBytes(%s) = %d, want %d", tc.c.Op, got, tc.want)
		}
	}
}

func TestFlopPeakAndFlops(t *testing.T) {
	env := artifacts.Environment{CPUs: 2, CPUMHz: 2000, CPUFlags: []string{"avx2", "avx512f", "amx_bf16", "fma"}}
	for _, tc := range []struct {
		dtype string
		want  float64
	}{
		{"f32", 2 * 2000e6 * 1.5 * 64},
		{"bf16", 2 * 2000e6 * 1.5 * 2048}, // AMX
		{"f16", 2 * 2000e6 * 1.5 * 64},    // no amx_fp16 or avx512_fp16 here: the FP32 peak
	} {
		if got, why := FlopPeak(env, tc.dtype); got != tc.want {
			t.Errorf("FlopPeak(%s) = %g (%s), want %g", tc.dtype, got, why, tc.want)
		}
	}
	if got, _ := FlopPeak(artifacts.Environment{CPUs: 2}, "f32"); got != 0 {
		t.Errorf("FlopPeak(no clock) = %g, want 0 (no compute floor)", got)
	}
	att := oracle.Case{Op: "attention", Dims: map[string]int{"B": 1, "Hq": 2, "Hkv": 1, "Q": 2, "K": 4, "D": 3, "Dv": 5}}
	// Query 0 sees 3 keys, query 1 sees 4: 7 visible scores per head.
	if got, want := Flops(att), 2.0*1*2*7*(3+5); got != want {
		t.Errorf("Flops(attention) = %g, want %g", got, want)
	}
}
