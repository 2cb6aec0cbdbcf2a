package sets

import (
	"fmt"
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

// TestSeed pins the derivation (docs/format.md) and that each part of it
// matters: warm set 0 ignores the round, everything else does not.
func TestSeed(t *testing.T) {
	sd := Seeds{Replay: 7, Rounds: []uint64{100, 200}}
	seed := func(id, pool string, round, s int) uint64 {
		v, err := sd.Seed(id, pool, round, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := seed("c", Warm, 0, 0), seed("c", Warm, 1, 0); a != b {
		t.Errorf("warm set 0 seeds differ between rounds: %#x, %#x", a, b)
	}
	distinct := map[uint64]string{}
	for _, k := range []struct {
		id, pool string
		round, s int
	}{{"c", Warm, 0, 0}, {"c", Warm, 0, 1}, {"c", Warm, 1, 1}, {"c", Novel, 0, 0}, {"c", Novel, 0, 1}, {"c", Novel, 1, 0}, {"d", Warm, 0, 0}, {"d", Novel, 0, 0}} {
		v := seed(k.id, k.pool, k.round, k.s)
		if prev, ok := distinct[v]; ok {
			t.Errorf("seed of %+v = %#x, the same as %s", k, v, prev)
		}
		distinct[v] = k.id + k.pool
	}
	if _, err := sd.Seed("c", Novel, 2, 0); err == nil || err.Error() != "sets: round 2: the replay drew seeds for 2 rounds" {
		t.Errorf("a round without a seed = %v", err)
	}
}

// TestPerturb: consecutive rounds always get different allocator fills,
// in 1..255.
func TestPerturb(t *testing.T) {
	for _, r := range []uint64{0, 1, 253, 254, 255, 1 << 63} {
		sd := Seeds{Replay: r}
		for round := range 300 {
			a, b := sd.Perturb(round), sd.Perturb(round+1)
			if a < 1 || a > 255 || a == b {
				t.Fatalf("Perturb(replay %d) rounds %d, %d = %d, %d: want different bytes in 1..255", r, round, round+1, a, b)
			}
		}
	}
}

// TestRuleSlots: as many sets as the rule's bytes for the device hold, at
// least 1, at most MaxNovel: 8 MiB on every device under rule 1 and on a
// CPU under rule 2, 256 MiB for a CUDA case under rule 2.
func TestRuleSlots(t *testing.T) {
	sig := func(shape ...int) []oracle.Param {
		return []oracle.Param{{Name: "X", Role: "input", Dtype: "f32", Shape: shape}, {Name: "Y", Role: "output", Dtype: "f32", Shape: shape}}
	}
	for _, tc := range []struct {
		rule   Rule
		device string
		sig    []oracle.Param
		want   int
	}{
		{Rule1, oracle.DeviceCPU, sig(2), MaxNovel},
		{Rule1, oracle.DeviceCPU, sig(16), MaxNovel}, // 128 B a set: exactly MaxNovel in NovelBytes
		{Rule1, oracle.DeviceCPU, sig(64), NovelBytes / 512},
		{Rule1, oracle.DeviceCPU, sig(256, 1024), 4},
		{Rule1, oracle.DeviceCPU, sig(512, 1000), 2},  // 4 MB a set
		{Rule1, oracle.DeviceCPU, sig(1024, 1536), 1}, // 12 MiB: past NovelBytes
		{Rule1, oracle.DeviceCPU, sig(4096, 4096), 1},
		{Rule1, oracle.DeviceCUDA, sig(1024, 1536), 1}, // rule 1: the same 8 MiB on a GPU
		{Rule2, oracle.DeviceCPU, sig(1024, 1536), 1},
		{Rule2, oracle.DeviceCPU, sig(256, 1024), 4},
		{Rule2, oracle.DeviceCUDA, sig(1024, 1536), 21}, // 12 MiB a set in 256 MiB
		{Rule2, oracle.DeviceCUDA, sig(4096, 4096), 2},  // 128 MiB a set
		{Rule2, oracle.DeviceCUDA, sig(8192, 8192), 1},  // 512 MiB: past the budget, one
		{Rule2, oracle.DeviceCUDA, sig(64), MaxNovel},   // 512 B a set: capped
		{Rule2, oracle.DeviceCUDA, sig(64, 1000), 524},  // 512,000 B a set
	} {
		if got := tc.rule.Slots(tc.device, tc.sig); got != tc.want {
			t.Errorf("rule %d Slots(%s, %v) = %d, want %d", tc.rule, tc.device, tc.sig[0].Shape, got, tc.want)
		}
	}
}

// TestRuleChecks: rule 1 judges NovelChecks calls a visit whatever the
// case; rule 2 at most as many as CheckBytes of outputs and CheckWork of
// oracle work hold, at least 1.
func TestRuleChecks(t *testing.T) {
	sigOf := func(c oracle.Case) []oracle.Param {
		sig, err := oracle.Signature(c)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	gemm := func(n int) oracle.Case {
		return oracle.Case{ID: "g", Op: "gemm", Dims: map[string]int{"M": n, "N": n, "K": n}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	}
	add := func(m, n int) oracle.Case {
		return oracle.Case{ID: "a", Op: "add", Dims: map[string]int{"M": m, "N": n}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	}
	for _, tc := range []struct {
		name string
		rule Rule
		c    oracle.Case
		want int64
	}{
		{"rule 1 gemm 1024³", Rule1, gemm(1024), NovelChecks},
		{"rule 1 add 2048²", Rule1, add(2048, 2048), NovelChecks},
		// 2.1e9 flops and 3·2^20 elements: 2e10 / (2^31 + 256·3·2^20) = 6.8
		{"gemm 1024³ (work)", Rule2, gemm(1024), 6},
		// 2·64³ flops and 3·64² elements: 2e10 / (524288 + 3145728) = 5450
		{"gemm 64³ (capped)", Rule2, gemm(64), NovelChecks},
		// a 16 MiB output: 64 MiB holds 4
		{"add 2048² (bytes)", Rule2, add(2048, 2048), 4},
		// 64 elements: every limit far off
		{"add 8x8", Rule2, add(8, 8), NovelChecks},
		// 512 MiB output: none fits, one is judged
		{"add 8192x16384 (at least one)", Rule2, add(8192, 16384), 1},
	} {
		if got := tc.rule.Checks(tc.c, sigOf(tc.c)); got != tc.want {
			t.Errorf("%s: Checks = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRuleOf: absent is rule 1, 2 and 3 are themselves, any other value
// is refused with the field and what is expected.
func TestRuleOf(t *testing.T) {
	for n, want := range map[int]Rule{0: Rule1, 2: Rule2, 3: Rule3} {
		if r, err := RuleOf(n); err != nil || r != want {
			t.Errorf("RuleOf(%d) = %d, %v; want %d", n, r, err, want)
		}
	}
	for _, n := range []int{1, 4, -1} {
		want := fmt.Sprintf("config.novelRule %d: want 2 or 3 (or absent, in a replay made before rule 2)", n)
		if _, err := RuleOf(n); err == nil || err.Error() != want {
			t.Errorf("RuleOf(%d) = %v, want %q", n, err, want)
		}
	}
}

// TestJudge: a set's outputs are judged against its own inputs' oracle; a
// wrong size is an error, not a verdict.
func TestJudge(t *testing.T) {
	c := oracle.Case{ID: "a", Op: "add", Dims: map[string]int{"M": 2, "N": 3}, Dtype: "f32", Pattern: "dyadic", Policy: "strict"}
	pool, err := Seeds{Replay: 1, Rounds: []uint64{2}}.Pool(c, Warm, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := oracle.Signature(c)
	outs := Outputs(sig)
	sum := func(s *Set) []byte {
		y := make([]float32, 6)
		for i := range y {
			y[i] = s.Inputs[0].F[i] + s.Inputs[1].F[i]
		}
		return oracle.Encode(oracle.F32(y))
	}
	if v, err := pool[1].Judge(outs, [][]byte{sum(pool[1])}); err != nil || !v.Pass {
		t.Errorf("set 1's own answer: %+v %v, want a pass", v, err)
	}
	if v, err := pool[1].Judge(outs, [][]byte{sum(pool[0])}); err != nil || v.Pass {
		t.Errorf("set 0's answer for set 1: %+v %v, want a failed verdict", v, err)
	}
	if _, err := pool[0].Judge(outs, [][]byte{make([]byte, 20)}); err == nil || err.Error() != "sets: output C: 20 bytes, want 24" {
		t.Errorf("a short output = %v", err)
	}
}

// TestRuleStaged: only rule 3 stages novel slots, and only a CUDA case's.
func TestRuleStaged(t *testing.T) {
	for _, tc := range []struct {
		rule   Rule
		device string
		want   bool
	}{{Rule1, oracle.DeviceCUDA, false}, {Rule2, oracle.DeviceCUDA, false}, {Rule3, oracle.DeviceCUDA, true}, {Rule3, oracle.DeviceCPU, false}} {
		if got := tc.rule.Staged(tc.device); got != tc.want {
			t.Errorf("Rule%d.Staged(%s) = %v, want %v", tc.rule, tc.device, got, tc.want)
		}
	}
}
