package oracle

import (
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// atLeast runs the test with n goroutines allowed, so [parallel] splits
// even on a machine of fewer cores.
func atLeast(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(max(n, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// TestParallelCovers: every index once, chunks starting on the alignment.
func TestParallelCovers(t *testing.T) {
	atLeast(t, 7)
	for _, n := range []int{0, 1, minChunk - 1, 2 * minChunk, 7*minChunk + 3} {
		for _, align := range []int{1, 2} {
			seen := make([]int32, n)
			parallel(n, align, func(lo, hi int) {
				if lo%align != 0 {
					t.Errorf("n %d: chunk at %d, not a multiple of %d", n, lo, align)
				}
				for i := lo; i < hi; i++ {
					seen[i]++ // chunks are disjoint: no race
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n %d align %d: index %d covered %d times", n, align, i, c)
				}
			}
		}
	}
}

// TestGenerateSplit: inputs generated in chunks equal, bit for bit, one
// serial pass of each tensor's stream (the definition in docs/inputs.md),
// for every pattern, at a size that splits.
func TestGenerateSplit(t *testing.T) {
	atLeast(t, 5)
	m, cols := 41, 7993 // 327713 elements, more than five chunks, odd: the last chunk ends mid-pair
	n := m * cols
	serial := map[string]func(*splitmix, []float32){"normal": fillNormal, "dyadic": fillDyadic, "ties": fillTies, "adversarial": fillAdversarial}
	for pattern, fill := range serial {
		c := Case{ID: "s", Op: "add", Dims: map[string]int{"M": m, "N": cols}, Dtype: "f32", Pattern: pattern, Seed: 9, Policy: "strict"}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		for k := range in {
			want := make([]float32, n)
			r := tensorStream(c.Seed, k)
			fill(&r, want)
			for i := range want {
				if math.Float32bits(in[k].F[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s tensor %d element %d: %#08x, one serial stream gives %#08x", pattern, k, i, math.Float32bits(in[k].F[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestCompareSplitFirst: with bad elements in several chunks, the verdict
// names the first one and counts them all, as one serial scan would.
func TestCompareSplitFirst(t *testing.T) {
	atLeast(t, 4)
	n := 4 * minChunk
	c := Case{ID: "a", Op: "add", Dims: map[string]int{"M": 16, "N": n / 16}, Dtype: "f32", Pattern: "dyadic", Seed: 3, Policy: "strict"}
	in, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := Reference(c, in)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(exp[0].Want[i])
	}
	late, early := 3*minChunk+5, minChunk+2 // the later chunk finishes first as often as not
	out[late] += 1
	out[early] += 1
	v := Compare(c, exp, []Tensor{{Dtype: "f32", F: out}})
	if v.Pass || v.Index != early || !strings.Contains(v.Reason, "(2 of 262144 elements outside)") {
		t.Fatalf("Compare = %+v, want a bound failure at %d with 2 of %d outside", v, early, n)
	}
	out[late] = float32(math.NaN())
	if v = Compare(c, exp, []Tensor{{Dtype: "f32", F: out}}); v.Index != late || !strings.HasPrefix(v.Reason, "nan: C[") {
		t.Fatalf("Compare = %+v, want the NaN at %d named first", v, late)
	}
	in[1].F[late], in[1].F[early] = float32(math.Inf(1)), float32(math.NaN())
	if _, err := Reference(c, in); err == nil || !strings.Contains(err.Error(), "input B["+strconv.Itoa(early)+"] = NaN, want a finite value") {
		t.Fatalf("Reference with non-finite inputs: %v, want input B[%d] named", err, early)
	}
}
