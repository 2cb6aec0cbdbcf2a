package oracle

import (
	"fmt"
	"math"
	"testing"
)

var negZero = float32(math.Copysign(0, -1))

// TestRankContracts feeds sort outputs that break each clause of the
// ranking contracts and checks the exact reason.
func TestRankContracts(t *testing.T) {
	x := []float32{1, 0, 1, negZero}
	in := []Tensor{F32(x)}
	for _, tc := range []struct {
		name, ranking string
		v             []float32
		i             []int64
		reason        string
	}{
		{"stable", RankingStable, []float32{0, negZero, 1, 1}, []int64{1, 3, 0, 2}, ""},
		{"stable signed zero order", RankingStable, []float32{negZero, 0, 1, 1}, []int64{3, 1, 0, 2}, "bits: V[0] = -0, want 0 (bit-exact)"},
		{"stable tie order", RankingStable, []float32{0, negZero, 1, 1}, []int64{1, 3, 2, 0}, "index: I[2] = 2, want 0 (2 of 4 elements differ)"},
		{"standard other tie order", RankingStandard, []float32{negZero, 0, 1, 1}, []int64{3, 1, 2, 0}, ""},
		{"standard duplicate", RankingStandard, []float32{0, negZero, 1, 1}, []int64{1, 1, 0, 2}, "rank: I[1] = 1 repeats I[0]"},
		{"standard out of range", RankingStandard, []float32{0, negZero, 1, 1}, []int64{1, 3, 0, 4}, "rank: I[3] = 4, want an index in [0, 4)"},
		{"standard negative", RankingStandard, []float32{0, negZero, 1, 1}, []int64{-1, 3, 0, 2}, "rank: I[0] = -1, want an index in [0, 4)"},
		{"standard index not matching", RankingStandard, []float32{0, negZero, 1, 1}, []int64{3, 1, 0, 2}, "rank: I[0] = 3 points at X[3] = -0, want V[0] = 0 (bit-equal)"},
		{"standard wrong multiset", RankingStandard, []float32{0, 0.5, 1, 1}, []int64{1, 3, 0, 2}, "bound: V[1] = 0.5, want -0 ± 0 (1 of 4 elements outside)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Case{ID: "s", Op: "sort", Dims: map[string]int{"M": 1, "N": 4}, Dtype: "f32", Pattern: "ties", Policy: "strict", Ranking: tc.ranking}
			exp, err := Reference(c, in)
			if err != nil {
				t.Fatal(err)
			}
			v := compare(c, func() []Tensor { return in }, exp, []Tensor{F32(tc.v), I64(tc.i)})
			if v.Reason != tc.reason || v.Pass != (tc.reason == "") {
				t.Errorf("Compare(sort %s, V=%v I=%v) = %v, %q, want %q", tc.ranking, tc.v, tc.i, v.Pass, v.Reason, tc.reason)
			}
		})
	}
}

// TestTopkArgmax pins topk's descending order and argmax's first-index
// and signed-zero rules.
func TestTopkArgmax(t *testing.T) {
	x := []float32{negZero, -1, 0, -2}
	c := Case{ID: "a", Op: "argmax", Dims: map[string]int{"M": 1, "N": 4}, Dtype: "f32", Pattern: "ties", Policy: "strict"}
	exp, err := Reference(c, []Tensor{F32(x)})
	if err != nil {
		t.Fatal(err)
	}
	if exp[0].Want[0] != 0 || !math.Signbit(exp[0].Want[0]) || exp[1].WantI[0] != 0 {
		t.Errorf("Reference(argmax %v) = %v, %v, want -0, 0", x, exp[0].Want, exp[1].WantI)
	}
	for _, tc := range []struct {
		v      float32
		i      int64
		reason string
	}{
		{negZero, 0, ""},
		{0, 2, "bits: V[0] = 0, want -0 (bit-exact)"},
		{negZero, 2, "index: I[0] = 2, want 0 (1 of 1 elements differ)"},
	} {
		v := Compare(c, exp, []Tensor{F32([]float32{tc.v}), I64([]int64{tc.i})})
		if v.Reason != tc.reason {
			t.Errorf("Compare(argmax, %v, %d) = %q, want %q", tc.v, tc.i, v.Reason, tc.reason)
		}
	}
	k := Case{ID: "k", Op: "topk", Dims: map[string]int{"M": 1, "N": 4, "K": 2}, Dtype: "f32", Pattern: "ties", Policy: "stable", Ranking: RankingStable}
	k.Policy = "strict"
	e, err := Reference(k, []Tensor{F32([]float32{1, 3, 3, 2})})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(e[0].Want, e[1].WantI) != "[3 3] [1 2]" {
		t.Errorf("Reference(topk [1 3 3 2], K=2) = %v %v, want [3 3] [1 2]", e[0].Want, e[1].WantI)
	}
}

// TestReferenceIndexErrors: ids and targets out of range are refused.
func TestReferenceIndexErrors(t *testing.T) {
	ce := Case{ID: "ce", Op: "cross_entropy", Dims: map[string]int{"M": 2, "N": 3}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	if _, err := Reference(ce, []Tensor{F32(make([]float32, 6)), I64([]int64{0, 3})}); err == nil || err.Error() != "case ce: reference: input T[1] = 3, want a target in [0, 3)" {
		t.Errorf("Reference(cross_entropy, T=[0 3]) error = %v", err)
	}
	em := Case{ID: "em", Op: "embedding", Dims: map[string]int{"V": 4, "D": 2, "M": 2}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	if _, err := Reference(em, []Tensor{F32(make([]float32, 8)), I64([]int64{-1, 0})}); err == nil || err.Error() != "case em: reference: input I[0] = -1, want an id in [0, 4)" {
		t.Errorf("Reference(embedding, I=[-1 0]) error = %v", err)
	}
	h := Case{ID: "h", Op: "add", Dims: map[string]int{"M": 1, "N": 1}, Dtype: "f16", Pattern: "normal", Policy: "strict"}
	x := Tensor{Dtype: "f16", F: []float32{0.1}}
	if _, err := Reference(h, []Tensor{x, x}); err == nil || err.Error() != "case h: reference: input A[0] = 0.1, not a f16 value" {
		t.Errorf("Reference(add f16, 0.1) error = %v", err)
	}
}

// TestPerturbAll moves one element of every float output of every op just
// outside its bound (to the nearest storage value outside) and checks the
// exact reason; just inside must pass.
func TestPerturbAll(t *testing.T) {
	if testing.Short() {
		t.Skip("long: make test runs it")
	}
	for _, op := range Ops() {
		for _, dtype := range storageDtypes {
			c := testCase(op, "normal", 5, propertyShapes[op][0])
			c.Dtype, c.Ranking = dtype, rankingsOf(op)[0]
			t.Run(op+"/"+dtype, func(t *testing.T) {
				in, err := Generate(c)
				if err != nil {
					t.Fatal(err)
				}
				exp, err := Reference(c, in)
				if err != nil {
					t.Fatal(err)
				}
				out := impls(op)[0].outputs(c, in)
				if v := Compare(c, exp, out); !v.Pass {
					t.Fatalf("Compare(%s) = %q, want pass", c.ID, v.Reason)
				}
				sig, _ := Signature(c)
				var outs []Param
				for _, p := range sig {
					if p.Role == "output" {
						outs = append(outs, p)
					}
				}
				for k, p := range outs {
					if p.Dtype == "i64" {
						continue
					}
					n := p.Elems()
					i := n / 2
					w, b := exp[k].Want[i], exp[k].Bound[i]
					if math.IsInf(b, 1) {
						continue
					}
					bad := cloneT(out)
					bad[k].F[i] = outsideS(dtype, w, b)
					v := Compare(c, exp, bad)
					reason := fmt.Sprintf("bound: %s[%d] = %s, want %s ± %s (1 of %d elements outside)",
						p.Name, i, fmtGot(bad[k].F[i]), fmtWant(w), fmtBound(b), n)
					if v.Pass || v.Reason != reason {
						t.Errorf("Compare(%s with %s[%d] = %v) = %q, want %q", c.ID, p.Name, i, bad[k].F[i], v.Reason, reason)
					}
				}
			})
		}
	}
}

func cloneT(ts []Tensor) []Tensor {
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = Tensor{Dtype: t.Dtype, F: append([]float32(nil), t.F...), I: append([]int64(nil), t.I...)}
		if t.I == nil {
			out[i].I = nil
		}
	}
	return out
}

// outsideS is the storage value nearest to want + 1.01*bound that lies
// strictly outside want ± bound.
func outsideS(dtype string, want, bound float64) float32 {
	f := toStorage(dtype, float32(want+1.01*bound))
	for math.Abs(float64(f)-want) <= bound || toStorage(dtype, f) != f {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// TestEncodeDecode round-trips every dtype and pins the rounding of
// float32 to f16 and bf16 (to nearest, ties to even, gradual underflow).
func TestEncodeDecode(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		in    float32
		bits  uint16
	}{
		{"f16", 1, 0x3C00},
		{"f16", -2, 0xC000},
		{"f16", 65504, 0x7BFF},
		{"f16", 65520, 0x7C00},         // rounds up to +Inf
		{"f16", 1 + 0x1p-11, 0x3C00},   // tie, to even
		{"f16", 1 + 3*0x1p-11, 0x3C02}, // tie, to even (up)
		{"f16", 0x1p-24, 0x0001},       // smallest subnormal
		{"f16", 0x1p-25, 0x0000},       // tie to even: zero
		{"f16", 0x1.8p-25, 0x0001},     // above the tie
		{"f16", negZero, 0x8000},
		{"bf16", 1, 0x3F80},
		{"bf16", 1 + 0x1p-8, 0x3F80},   // tie, to even
		{"bf16", 1 + 3*0x1p-8, 0x3F82}, // tie, to even (up)
		{"bf16", -3.5, 0xC060},
	} {
		b := Encode(Tensor{Dtype: tc.dtype, F: []float32{tc.in}})
		if got := uint16(b[0]) | uint16(b[1])<<8; got != tc.bits {
			t.Errorf("Encode(%s %g) = %#04x, want %#04x", tc.dtype, tc.in, got, tc.bits)
		}
	}
	for _, dtype := range []string{"f32", "f16", "bf16", "i64"} {
		c := Case{ID: "e", Op: "embedding", Dims: map[string]int{"V": 8, "D": 4, "M": 5}, Dtype: "f32", Pattern: "normal", Seed: 3, Policy: "strict"}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		x := in[0]
		if dtype == "i64" {
			x = in[1]
		} else {
			x.Dtype = dtype
			for i, v := range x.F {
				x.F[i] = toStorage(dtype, v)
			}
		}
		got, err := Decode(dtype, Encode(x))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(x) {
			t.Errorf("Decode(%s, Encode(%v)) = %v, %v", dtype, x, got, err)
		}
	}
	if _, err := Decode("f16", []byte{1, 2, 3}); err == nil || err.Error() != "decode: 3 bytes is not a whole number of f16 elements" {
		t.Errorf("Decode(f16, 3 bytes) error = %v", err)
	}
	if _, err := Decode("u8", nil); err == nil || err.Error() != `decode: dtype "u8": want f32, f16, bf16 or i64` {
		t.Errorf("Decode(u8) error = %v", err)
	}
}

// TestGenerateNewPatterns pins the first values of ties and adversarial
// and of the index tensors (docs/inputs.md).
func TestGenerateNewPatterns(t *testing.T) {
	for _, pattern := range []string{"ties", "adversarial"} {
		c := Case{ID: "rmsnorm-2x4", Op: "rmsnorm", Dims: map[string]int{"M": 2, "N": 4}, Dtype: "f32", Pattern: pattern, Seed: 42, Policy: "strict"}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		var bits []string
		for _, v := range in[0].F {
			bits = append(bits, fmt.Sprintf("%08x", math.Float32bits(v)))
		}
		if got, want := fmt.Sprint(bits), generatedVectors[pattern]; got != want {
			t.Errorf("Generate(%s, seed 42) X bits = %s, want %s", pattern, got, want)
		}
	}
	c := Case{ID: "ce", Op: "cross_entropy", Dims: map[string]int{"M": 6, "N": 10}, Dtype: "f32", Pattern: "normal", Seed: 42, Policy: "strict"}
	in, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(in[1].I); got != generatedVectors["targets"] {
		t.Errorf("Generate(cross_entropy 6x10, seed 42) T = %s, want %s", got, generatedVectors["targets"])
	}
	// ties: 31 distinct values and both zeros appear.
	tc := Case{ID: "t", Op: "sum", Dims: map[string]int{"M": 64, "N": 256}, Dtype: "f32", Pattern: "ties", Seed: 1, Policy: "strict"}
	tin, _ := Generate(tc)
	seen := map[uint32]bool{}
	for _, v := range tin[0].F {
		seen[math.Float32bits(v)] = true
	}
	if len(seen) != 32 || !seen[0] || !seen[0x80000000] {
		t.Errorf("Generate(ties) gave %d bit patterns, want 32 (31 values and both zeros)", len(seen))
	}
}

var generatedVectors = map[string]string{
	"ties":        "[bfa00000 40600000 00000000 c0500000 3fa00000 c0500000 c0100000 3fe00000]",
	"adversarial": "[43c63288 c3c5bc88 4403f048 c4042848 c42fd8bc 442fa0bc 43819a08 c3815e08]",
	"targets":     "[9 3 5 6 5 3]",
}
