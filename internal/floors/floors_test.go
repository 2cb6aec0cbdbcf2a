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

// TestBelow feeds the floor check rows at, above and below each floor.
func TestBelow(t *testing.T) {
	c := oracle.Case{ID: "g", Op: "gemm", Dims: map[string]int{"M": 4, "N": 4, "K": 4}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	sig, err := oracle.Signature(c)
	if err != nil {
		t.Fatal(err)
	}
	// 192 bytes at 1.92 GB/s: 100 ns, 50 ns after the slack; 128 flop at
	// 1 thread x 1 GHz x 32 (AVX2 FMA): 4 ns, 2 ns after the slack.
	f := Case(c, sig, 2, 1, 1e9, []string{"avx2", "fma"}, func(n int) float64 {
		if n != 2*192 {
			t.Errorf("bandwidth asked for a %d-byte working set, want %d", n, 2*192)
		}
		return 1.92e9
	})
	if f.Bytes != 192 || f.WorkingSet != 384 || f.MemoryNs != 50 || f.Flops != 128 || f.ComputeNs != 2 || f.ISA != "AVX2 FMA" {
		t.Fatalf("Case = %+v", f)
	}
	for _, tc := range []struct {
		minNs float64
		want  string
	}{
		{50, ""},
		{49, "below_physical_floor: fastest sample 49 ns per call, memory floor 50 ns (192 bytes at 1.9 GB/s for a 384-byte working set, slack 2)"},
	} {
		if got := Below(f, tc.minNs); got != tc.want {
			t.Errorf("Below(%g) = %q, want %q", tc.minNs, got, tc.want)
		}
	}
	f.MemoryNs = 0 // no memory floor: the compute floor is checked
	if got, want := Below(f, 1), "below_physical_floor: fastest sample 1 ns per call, compute floor 2 ns (128 flop at 32 GFLOP/s AVX2 FMA, slack 2)"; got != want {
		t.Errorf("Below(1 ns, compute) = %q, want %q", got, want)
	}
	lo := Lowest([][]artifacts.CaseFloor{{{Case: "g", MemoryNs: 50, ComputeNs: 2}}, {{Case: "g", MemoryNs: 40, ComputeNs: 3}}})
	if g := lo["g"]; g.MemoryNs != 40 || g.ComputeNs != 2 {
		t.Errorf("Lowest = %+v, want memory 40 ns and compute 2 ns (the most lenient of each)", g)
	}
}
