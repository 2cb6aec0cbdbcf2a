package oracle

import (
	"math"
	"testing"
)

// TestSplitMix64 checks the stream against the reference implementation's
// first outputs from state 0 (Vigna, splitmix64.c).
func TestSplitMix64(t *testing.T) {
	s := splitmix{state: 0}
	for i, want := range []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F} {
		if got := s.next(); got != want {
			t.Errorf("splitmix{0}.next() #%d = %#016x, want %#016x", i+1, got, want)
		}
	}
}

func TestTensorStream(t *testing.T) {
	for _, tc := range []struct {
		seed  uint64
		index int
		want  uint64
	}{
		{42, 0, 0xBDD732262FEB6E95},
		{42, 1, 0x28EFE333B266F103},
	} {
		if got := tensorStream(tc.seed, tc.index).state; got != tc.want {
			t.Errorf("tensorStream(%d, %d).state = %#016x, want %#016x", tc.seed, tc.index, got, tc.want)
		}
	}
}

// TestGenerateVectors pins the first values of each pattern; the same
// vectors are printed in docs/inputs.md for other implementations.
func TestGenerateVectors(t *testing.T) {
	t.Run("exact", func(t *testing.T) { // gemm 2x2x4, seed 42: A then B
		c := Case{ID: "gemm-2x2x4", Op: "gemm", Dims: map[string]int{"M": 2, "N": 2, "K": 4}, Dtype: "f32", Pattern: PatternExact, Seed: 42, Policy: "strict"}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range [][]uint32{
			{0x3f575000, 0xbf287000, 0x3f671000, 0x3f3d9000, 0xbf321000, 0xbf731000, 0x3f6a1000, 0x3f7a9000},
			{0x3f800000, 0xbf800000, 0x3f800000, 0xbf800000, 0x3f800000, 0x3f800000, 0xbf800000, 0xbf800000},
		} {
			for i, w := range want {
				if got := math.Float32bits(in[k].F[i]); got != w {
					t.Errorf("exact tensor %d element %d = %08x, want %08x", k, i, got, w)
				}
			}
		}
	})
	for _, tc := range []struct {
		pattern string
		want    [][]uint32 // binary32 bits per input tensor
	}{
		{"normal", [][]uint32{
			{0x3e610c34, 0xbf7e47d7, 0x3f4ee0a0, 0x3f8248f3, 0x401782ee, 0x3f1fc34f, 0x3f845958, 0x3f80684a},
			{0xbe6e4f17, 0xbe9c1de2, 0x3f9d29a5, 0xbed39a82},
		}},
		{"dyadic", [][]uint32{
			{0xbfa00000, 0x40700000, 0xbe000000, 0xc0600000, 0x3fb00000, 0xc0600000, 0xc0200000, 0x3ff00000},
			{0x40800000, 0xbfc00000, 0x00000000, 0x3fc00000},
		}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			c := Case{ID: "rmsnorm-2x4", Op: "rmsnorm", Dims: map[string]int{"M": 2, "N": 4},
				Dtype: "f32", Pattern: tc.pattern, Seed: 42, Policy: "strict"}
			in, err := Generate(c)
			if err != nil {
				t.Fatalf("Generate(%s) error %v", c.ID, err)
			}
			if len(in) != len(tc.want) {
				t.Fatalf("Generate(%s) = %d tensors, want %d", c.ID, len(in), len(tc.want))
			}
			for k := range tc.want {
				for i, w := range tc.want[k] {
					if got := math.Float32bits(in[k].F[i]); got != w {
						t.Errorf("Generate(%s)[%d][%d] = %#08x, want %#08x", c.ID, k, i, got, w)
					}
				}
			}
		})
	}
}

// TestGeneratePrefix checks that a tensor's values do not depend on its
// size: a larger case starts with the smaller case's values.
func TestGeneratePrefix(t *testing.T) {
	small := Case{ID: "s", Op: "add", Dims: map[string]int{"M": 1, "N": 10}, Dtype: "f32", Pattern: "normal", Seed: 7, Policy: "strict"}
	large := small
	large.Dims = map[string]int{"M": 3, "N": 100}
	a, err := Generate(small)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(large)
	if err != nil {
		t.Fatal(err)
	}
	for k := range a {
		for i := range a[k].F {
			if a[k].F[i] != b[k].F[i] {
				t.Fatalf("Generate(large)[%d][%d] = %v, want %v (prefix of the small case)", k, i, b[k].F[i], a[k].F[i])
			}
		}
	}
}

// TestGenerateStatistics checks the shape of each pattern on 2^16 values.
func TestGenerateStatistics(t *testing.T) {
	for _, p := range []string{"normal", "dyadic"} {
		t.Run(p, func(t *testing.T) {
			c := Case{ID: "sum", Op: "sum", Dims: map[string]int{"M": 256, "N": 256}, Dtype: "f32", Pattern: p, Seed: 1, Policy: "strict"}
			in, err := Generate(c)
			if err != nil {
				t.Fatal(err)
			}
			x := in[0].F
			var s, s2 float64
			for _, v := range x {
				s += float64(v)
				s2 += float64(v) * float64(v)
				if p == "dyadic" && (v*8 != float32(int(v*8)) || v < -4 || v > 4) {
					t.Fatalf("dyadic value %v, want k/8 with k in [-32, 32]", v)
				}
				if p == "normal" && (v <= -6 || v >= 6) {
					t.Fatalf("normal value %v, want inside (-6, 6)", v)
				}
			}
			n := float64(len(x))
			mean, variance := s/n, s2/n-(s/n)*(s/n)
			wantVar := 1.0
			if p == "dyadic" {
				wantVar = (65*65 - 1) / 12.0 / 64 // discrete uniform on 65 points, scaled by 1/8
			}
			if math.Abs(mean) > 0.02 || math.Abs(variance/wantVar-1) > 0.03 {
				t.Errorf("Generate(%s) mean, variance = %.4f, %.4f, want 0, %.4f", p, mean, variance, wantVar)
			}
		})
	}
}

func TestGenerateDistinct(t *testing.T) {
	c := Case{ID: "add", Op: "add", Dims: map[string]int{"M": 4, "N": 64}, Dtype: "f32", Pattern: "normal", Seed: 1, Policy: "strict"}
	in, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Seed = 2
	other, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	if sameBits(in[0].F, in[1].F) || sameBits(in[0].F, other[0].F) {
		t.Errorf("Generate gave equal tensors for different positions or seeds")
	}
}

func TestGenerateInvalid(t *testing.T) {
	c := Case{ID: "x", Op: "add", Dims: map[string]int{"M": 1, "N": 1}, Dtype: "f32", Pattern: "uniform", Policy: "strict"}
	_, err := Generate(c)
	if want := `case x: pattern: unknown pattern "uniform" (known: normal, dyadic, ties, adversarial, exact)`; err == nil || err.Error() != want {
		t.Errorf("Generate(%+v) error = %v, want %s", c, err, want)
	}
}
