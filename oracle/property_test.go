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
	"gemm_relu":          {{"M": 4, "N": 50, "K": 300}, {"M": 3, "N": 7, "K": 1}},
	"gemm_gelu":          {{"M": 4, "N": 50, "K": 300}, {"M": 3, "N": 7, "K": 1}},
	"bmm":                {{"B": 3, "M": 4, "N": 20, "K": 100}},
	"gemv":               {{"M": 64, "K": 700}, {"M": 5, "K": 1}},
	"add":                {{"M": 7, "N": 300}, {"M": 1, "N": 1000}},
	"gelu_add":           {{"M": 8, "N": 500}},
	"gelu_pair":          {{"M": 8, "N": 500}},
	"sigmoid_pair":       {{"M": 8, "N": 500}},
	"swiglu":             {{"M": 8, "N": 500}},
	"rope":               {{"M": 16, "N": 100, "R": 64}, {"M": 3, "N": 8, "R": 8}},
	"sum":                {{"M": 64, "N": 100}, {"M": 64, "N": 300}, {"M": 32, "N": 1000}, {"M": 16, "N": 4096}, {"M": 3, "N": 1}},
	"max":                {{"M": 16, "N": 300}, {"M": 3, "N": 1}},
	"softmax":            {{"M": 16, "N": 100}, {"M": 8, "N": 300}, {"M": 8, "N": 1000}, {"M": 2, "N": 4096}, {"M": 4, "N": 1}},
	"rmsnorm":            {{"M": 16, "N": 100}, {"M": 8, "N": 300}, {"M": 8, "N": 1000}, {"M": 2, "N": 4096}, {"M": 4, "N": 1}},
	"layernorm":          {{"M": 16, "N": 100}, {"M": 8, "N": 300}, {"M": 8, "N": 1000}, {"M": 2, "N": 4096}, {"M": 4, "N": 1}},
	"residual_layernorm": {{"M": 8, "N": 300}, {"M": 2, "N": 4096}},
	"cross_entropy":      {{"M": 16, "N": 1000}, {"M": 4, "N": 1}},
	"scan_ordered":       {{"M": 8, "N": 300}},
	"scan":               {{"M": 8, "N": 1000}, {"M": 4, "N": 37}},
	"argmax":             {{"M": 16, "N": 300}},
	"topk":               {{"M": 8, "N": 300, "K": 17}},
	"sort":               {{"M": 8, "N": 100}},
	"embedding":          {{"V": 50, "D": 33, "M": 20}},
	"attention": {
		{"B": 1, "Hq": 4, "Hkv": 2, "Q": 5, "K": 300, "D": 64, "Dv": 32},
		{"B": 2, "Hq": 2, "Hkv": 1, "Q": 16, "K": 16, "D": 16, "Dv": 16},
	},
}

// storageDtypes are the storage dtypes the property tests run every op
// in (every op takes half storage).
var storageDtypes = []string{"f32", "f16", "bf16"}

// tightness is the largest observed |got-want|/bound of one implementation
// over all property runs of one pattern.
type tightness struct {
	op, dtype, shape, impl, pattern string
	ratio                           float64
	elems                           int
}

var (
	propertyOnce    sync.Once
	propertyResults []tightness
)

func shapeName(dims map[string]int) string {
	var parts []string
	for _, d := range []string{"B", "Hq", "Hkv", "Q", "V", "D", "Dv", "M", "N", "K", "R"} {
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
// patternsOf is every pattern a case of op in dtype may have: exact only
// for the matrix ops in f32.
func patternsOf(op, dtype string) []string {
	var out []string
	for _, p := range Patterns() {
		if p != PatternExact || tf32Ops[op] && dtype == "f32" {
			out = append(out, p)
		}
	}
	return out
}

func properties(t *testing.T) []tightness {
	propertyOnce.Do(func() {
		seeds := []uint64{1, 2, 3}
		if testing.Short() {
			seeds = seeds[:1]
		}
		worst := map[[5]string]*tightness{}
		for _, op := range Ops() {
			for _, dims := range propertyShapes[op] {
				for _, dtype := range storageDtypes {
					for _, pattern := range patternsOf(op, dtype) {
						for _, seed := range seeds {
							for _, ranking := range rankingsOf(op) {
								c := testCase(op, pattern, seed, dims)
								c.Dtype, c.Ranking = dtype, ranking
								c.ID += "-" + dtype + ranking
								t.Run(c.ID, func(t *testing.T) {
									runProperty(t, c, worst)
								})
							}
						}
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
			if a.dtype != b.dtype {
				return a.dtype < b.dtype
			}
			return a.pattern < b.pattern
		})
	})
	return propertyResults
}

func rankingsOf(op string) []string {
	if ops[op].ranking {
		return []string{RankingStable, RankingStandard}
	}
	return []string{""}
}

func runProperty(t *testing.T, c Case, worst map[[5]string]*tightness) {
	in, err := Generate(c)
	if err != nil {
		t.Fatalf("Generate(%s) error %v", c.ID, err)
	}
	exp, err := Reference(c, in)
	if err != nil {
		if c.Dtype != "f32" && strings.Contains(err.Error(), "overflows") {
			return // adversarial magnitudes do not fit half storage
		}
		t.Fatalf("Reference(%s) error %v", c.ID, err)
	}
	for _, im := range impls(c.Op) {
		if strings.HasSuffix(im.name, "/reverse-ties") && c.Ranking == RankingStable {
			continue // legal under the standard contract only
		}
		if strings.HasSuffix(im.name, "noshift") && c.Pattern == "adversarial" {
			continue // exp without max subtraction overflows: a real failure of that variant
		}
		out := im.outputs(c, in)
		v := Compare(c, exp, out)
		if !v.Pass {
			t.Errorf("Compare(%s, %s) = %q, want pass", c.ID, im.name, v.Reason)
		}
		key := [5]string{c.Op, c.Dtype, shapeName(c.Dims), im.name, c.Pattern}
		w := worst[key]
		if w == nil {
			w = &tightness{op: c.Op, dtype: c.Dtype, shape: shapeName(c.Dims), impl: im.name, pattern: c.Pattern}
			worst[key] = w
		}
		w.ratio = max(w.ratio, v.MaxRatio)
		w.elems += v.Checked
	}
}

// TestProperty checks that binary32 implementations of every op, in many
// evaluation orders, stay inside the bound on every element.
func TestProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("long: make test runs it")
	}
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
	type key struct{ op, dtype, shape, pattern string }
	realistic, adversarial := map[key]tightness{}, map[key]tightness{}
	var keys []key
	for _, r := range res {
		k := key{r.op, r.dtype, r.shape, r.pattern}
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
		if a.dtype != b.dtype {
			return a.dtype < b.dtype
		}
		if a.shape != b.shape {
			return a.shape < b.shape
		}
		return a.pattern < b.pattern
	})
	var b strings.Builder
	fmt.Fprintf(&b, "largest |got-want|/bound per op and shape, over seeds and implementations\n")
	fmt.Fprintf(&b, "%-18s %-5s %-34s %-11s %9s %-44s %11s\n", "op", "dtype", "shape", "pattern", "max", "worst implementation", "sorted")
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
		fmt.Fprintf(&b, "%-18s %-5s %-34s %-11s %9.3g %-44s %11s\n", k.op, k.dtype, k.shape, k.pattern, r.ratio, name, adv)
	}
	t.Log("\n" + b.String())
	for _, r := range res {
		if r.ratio > 1 {
			t.Errorf("%s %s %s %s: max err/bound = %g, want <= 1", r.impl, r.dtype, r.shape, r.pattern, r.ratio)
		}
	}
}
