package oracle

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

// propertyShapes are the sizes the property tests run per op: widths that
// are not powers of two, a width of one, and K up to 512.
var propertyShapes = map[string][]map[string]int{
	"gemm": {
		{"M": 3, "N": 100, "K": 512},
		{"M": 4, "N": 300, "K": 100},
		{"M": 5, "N": 1000, "K": 37},
		{"M": 16, "N": 16, "K": 256},
		{"M": 2, "N": 3, "K": 1},
	},
	"add":       {{"M": 7, "N": 300}, {"M": 1, "N": 1000}},
	"sum":       {{"M": 64, "N": 100}, {"M": 64, "N": 300}, {"M": 32, "N": 1000}, {"M": 16, "N": 4096}, {"M": 3, "N": 1}},
	"softmax":   {{"M": 16, "N": 100}, {"M": 8, "N": 300}, {"M": 8, "N": 1000}, {"M": 2, "N": 4096}, {"M": 4, "N": 1}},
	"rmsnorm":   {{"M": 16, "N": 100}, {"M": 8, "N": 300}, {"M": 8, "N": 1000}, {"M": 2, "N": 4096}, {"M": 4, "N": 1}},
	"layernorm": {{"M": 16, "N": 100}, {"M": 8, "N": 300}, {"M": 8, "N": 1000}, {"M": 2, "N": 4096}, {"M": 4, "N": 1}},
}

// tightness is the largest observed |got-want|/bound of one implementation
// over all property runs of one pattern.
type tightness struct {
	op, shape, impl, pattern string
	ratio                    float64
	elems                    int
}

var (
	propertyOnce    sync.Once
	propertyResults []tightness
)

func shapeName(dims map[string]int) string {
	var parts []string
	for _, d := range []string{"M", "N", "K"} {
		if v, ok := dims[d]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", d, v))
		}
	}
	return strings.Join(parts, ",")
}

func testCase(op, pattern string, seed uint64, dims map[string]int) Case {
	return Case{
		ID:      fmt.Sprintf("%s-%s-%s-%d", op, strings.ReplaceAll(shapeName(dims), ",", "-"), pattern, seed),
		Op:      op,
		Dims:    dims,
		Dtype:   "f32",
		Pattern: pattern,
		Seed:    seed,
		Policy:  "strict",
	}
}

// properties runs every binary32 implementation over every property case
// once per test binary and checks that each output passes Compare.
func properties(t *testing.T) []tightness {
	propertyOnce.Do(func() {
		seeds := []uint64{1, 2, 3}
		if testing.Short() {
			seeds = seeds[:1]
		}
		worst := map[[4]string]*tightness{}
		for _, op := range Ops() {
			for _, dims := range propertyShapes[op] {
				for _, pattern := range Patterns() {
					for _, seed := range seeds {
						c := testCase(op, pattern, seed, dims)
						t.Run(c.ID, func(t *testing.T) {
							in, err := Generate(c)
							if err != nil {
								t.Fatalf("Generate(%s) error %v", c.ID, err)
							}
							want, bound, err := Reference(c, in)
							if err != nil {
								t.Fatalf("Reference(%s) error %v", c.ID, err)
							}
							for _, im := range impls(op) {
								out := im.run(c, in)
								v := Compare(c, want, bound, [][]float32{out})
								if !v.Pass {
									t.Errorf("Compare(%s, %s) = %q, want pass", c.ID, im.name, v.Reason)
								}
								key := [4]string{op, shapeName(dims), im.name, pattern}
								w := worst[key]
								if w == nil {
									w = &tightness{op: op, shape: shapeName(dims), impl: im.name, pattern: pattern}
									worst[key] = w
								}
								w.ratio = max(w.ratio, v.MaxRatio)
								w.elems += v.Checked
							}
						})
					}
				}
			}
		}
		for _, w := range worst {
			propertyResults = append(propertyResults, *w)
		}
		sort.Slice(propertyResults, func(i, j int) bool {
			a, b := propertyResults[i], propertyResults[j]
			if a.impl != b.impl {
				return a.impl < b.impl
			}
			if a.shape != b.shape {
				return a.shape < b.shape
			}
			return a.pattern < b.pattern
		})
	})
	return propertyResults
}

// TestProperty checks that binary32 implementations of every op, in many
// evaluation orders, stay inside the bound on every element.
func TestProperty(t *testing.T) {
	if len(properties(t)) == 0 {
		t.Fatal("properties ran no implementation")
	}
}

// TestTightness prints, per op and implementation, the largest observed
// error as a fraction of the bound (docs/oracle.md, "Tightness"):
//
//	go test ./oracle/ -run TestTightness -v
func TestTightness(t *testing.T) {
	res := properties(t)
	type key struct{ op, shape, pattern string }
	realistic, adversarial := map[key]tightness{}, map[key]tightness{}
	var keys []key
	for _, r := range res {
		k := key{r.op, r.shape, r.pattern}
		m := realistic
		if strings.HasSuffix(r.impl, "/sorted") {
			m = adversarial
		}
		_, seen := realistic[k]
		if _, seenA := adversarial[k]; !seen && !seenA {
			keys = append(keys, k)
		}
		if w, ok := m[k]; !ok || r.ratio > w.ratio {
			m[k] = r
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.shape != b.shape {
			return a.shape < b.shape
		}
		return a.pattern < b.pattern
	})
	var b strings.Builder
	fmt.Fprintf(&b, "largest |got-want|/bound per op and shape, over seeds and implementations\n")
	fmt.Fprintf(&b, "%-10s %-16s %-7s %9s %-40s %11s\n", "op", "shape", "pattern", "max", "worst implementation", "adversarial")
	for _, k := range keys {
		r := realistic[k]
		adv := "-"
		if a, ok := adversarial[k]; ok {
			adv = fmt.Sprintf("%.3g", a.ratio)
		}
		name := r.impl
		if r.ratio == 0 {
			name = "(every implementation exact)"
		}
		fmt.Fprintf(&b, "%-10s %-16s %-7s %9.3g %-40s %11s\n", k.op, k.shape, k.pattern, r.ratio, name, adv)
	}
	t.Log("\n" + b.String())
	for _, r := range res {
		if r.ratio > 1 {
			t.Errorf("%s %s %s: max err/bound = %g, want <= 1", r.impl, r.shape, r.pattern, r.ratio)
		}
	}
}
