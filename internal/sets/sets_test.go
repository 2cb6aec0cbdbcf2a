package sets

import (
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

// TestNovelSlots: as many as NovelBytes holds, at least 1, at most
// MaxNovel.
func TestNovelSlots(t *testing.T) {
	sig := func(shape ...int) []oracle.Param {
		return []oracle.Param{{Name: "X", Role: "input", Dtype: "f32", Shape: shape}, {Name: "Y", Role: "output", Dtype: "f32", Shape: shape}}
	}
	for _, tc := range []struct {
		sig  []oracle.Param
		want int
	}{
		{sig(2), MaxNovel},
		{sig(16), MaxNovel}, // 128 B a set: exactly MaxNovel in NovelBytes
		{sig(64), NovelBytes / 512},
		{sig(256, 1024), 4},
		{sig(512, 1000), 2},  // 4 MB a set
		{sig(1024, 1536), 1}, // 12 MiB: past NovelBytes
		{sig(4096, 4096), 1},
	} {
		if got := NovelSlots(tc.sig); got != tc.want {
			t.Errorf("NovelSlots(%v) = %d, want %d", tc.sig[0].Shape, got, tc.want)
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
