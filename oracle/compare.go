package oracle

import (
	"fmt"
	"math"
	"strconv"
	"sync"
)

// Verdict is the result of checking a case's outputs against its reference.
// When Pass is false, Reason is one line in one of the forms of
// docs/oracle.md ("Verdicts") and Output, Index, Got, Want and Bound
// describe the first failing element of the first failing output (Index is
// -1 when no single element is to blame). MaxRatio is the largest
// |got-want|/bound over all finite elements checked, a measure of how
// tight the bound was; Checked counts the elements compared.
type Verdict struct {
	Pass     bool    `json:"pass"`
	Reason   string  `json:"reason,omitempty"`
	Output   string  `json:"output,omitempty"`
	Index    int     `json:"index"`
	Got      float64 `json:"got"`
	Want     float64 `json:"want"`
	Bound    float64 `json:"bound"`
	MaxRatio float64 `json:"max_ratio"`
	Checked  int     `json:"checked"`
}

// Check regenerates the inputs and the reference of c and compares outputs
// (one per output param, signature order) against them. The error reports
// a case that could not be checked; a failed check is a Verdict.
func Check(c Case, outputs []Tensor) (Verdict, error) {
	inputs, err := Generate(c)
	if err != nil {
		return Verdict{}, err
	}
	exp, err := Reference(c, inputs)
	if err != nil {
		return Verdict{}, err
	}
	return compare(c, func() []Tensor { return inputs }, exp, outputs), nil
}

// Compare checks every element of outputs (one per output param of
// [Signature](c), in signature order) against the [Expected] values from
// [Reference]. It regenerates the inputs of c only when it needs them: to
// tell whether a failing output is a copy of an input, and to check the
// indices of topk and sort under the standard ranking contract.
func Compare(c Case, exp []Expected, outputs []Tensor) Verdict {
	return compare(c, func() []Tensor {
		in, err := Generate(c)
		if err != nil {
			return nil
		}
		return in
	}, exp, outputs)
}

// outputCheck is the scan of one output tensor.
type outputCheck struct {
	name     string
	k        int // position among the outputs
	n        int
	firstBad int // first element outside its bound (finite got), -1 if none
	bad      int // elements outside their bound, non-finite ones included
	firstNaN int // first NaN or infinite element whose want differs, -1 if none
	maxRatio float64
}

// bitExact reports whether output name of c must match the reference bit
// for bit, signed zeros included: copies of input elements.
func bitExact(c Case, name string) bool {
	switch c.Op {
	case "argmax", "embedding":
		return true
	case "topk", "sort":
		return c.Ranking == RankingStable && name == "V"
	}
	return false
}

func compare(c Case, inputs func() []Tensor, exp []Expected, outputs []Tensor) Verdict {
	fail := func(reason string) Verdict { return Verdict{Reason: reason, Index: -1} }
	sig, err := Signature(c)
	if err != nil {
		return fail(err.Error()) // "case ID: ..." from Validate
	}
	var outs, ins []Param
	for _, p := range sig {
		if p.Role == RoleOutput {
			outs = append(outs, p)
		} else {
			ins = append(ins, p)
		}
	}
	if len(outputs) != len(outs) {
		return fail(fmt.Sprintf("outputs: got %d tensors, want %d", len(outputs), len(outs)))
	}
	if len(exp) != len(outs) {
		return fail(fmt.Sprintf("reference: got %d expected tensors, want %d", len(exp), len(outs)))
	}
	for k, p := range outs {
		n, e := p.Elems(), exp[k]
		if outputs[k].Dtype != p.Dtype {
			return fail(fmt.Sprintf("dtype: %s is %s, want %s", p.Name, outputs[k].Dtype, p.Dtype))
		}
		if outputs[k].Len() != n {
			return fail(fmt.Sprintf("length: %s has %d elements, want %d", p.Name, outputs[k].Len(), n))
		}
		if p.Dtype == "i64" {
			if len(e.WantI) != n {
				return fail(fmt.Sprintf("reference: %s has %d expected elements, want %d", p.Name, len(e.WantI), n))
			}
		} else if len(e.Want) != n || len(e.Bound) != n {
			return fail(fmt.Sprintf("reference: %s has %d expected and %d bound elements, want %d", p.Name, len(e.Want), len(e.Bound), n))
		}
	}
	var cached []Tensor
	in := func() []Tensor {
		if cached == nil {
			cached = inputs()
		}
		return cached
	}
	v := Verdict{Pass: true, Index: -1}
	var first *Verdict
	for k, p := range outs {
		var ov Verdict
		if p.Dtype == "i64" {
			ov = compareIndex(c, p, k, exp, outputs, ins, in)
		} else {
			ov = compareFloat(c, p, k, exp[k], outputs[k].F, ins, in)
		}
		v.Checked += p.Elems()
		v.MaxRatio = math.Max(v.MaxRatio, ov.MaxRatio)
		if first == nil && !ov.Pass {
			first = &ov
		}
	}
	if first == nil {
		return v
	}
	first.Checked, first.MaxRatio = v.Checked, v.MaxRatio
	return *first
}

// compareFloat checks one float output against want ± bound.
func compareFloat(c Case, p Param, k int, e Expected, out []float32, ins []Param, inputs func() []Tensor) Verdict {
	oc := scan(k, p.Name, out, e.Want, e.Bound)
	v := Verdict{Pass: true, Index: -1, MaxRatio: oc.maxRatio}
	if oc.bad == 0 {
		if !bitExact(c, p.Name) {
			return v
		}
		for i, g := range out {
			if math.Float32bits(g) != math.Float32bits(float32(e.Want[i])) {
				v.Pass, v.Output, v.Index, v.Got, v.Want = false, p.Name, i, float64(g), e.Want[i]
				v.Reason = fmt.Sprintf("bits: %s[%d] = %s, want %s (bit-exact)", p.Name, i, fmtGot(g), fmtGot(float32(e.Want[i])))
				return v
			}
		}
		return v
	}
	v.Pass = false
	v.Output = p.Name
	i := oc.firstNaN
	if i < 0 {
		i = oc.firstBad
	}
	v.Index, v.Got = i, float64(out[i])
	v.Want, v.Bound = e.Want[i], e.Bound[i]
	if r := trivial(p.Name, out, ins, inputs); r != "" {
		v.Reason = r
		return v
	}
	switch g := out[i]; {
	case oc.firstNaN >= 0 && g != g:
		v.Reason = fmt.Sprintf("nan: %s[%d] is NaN, want %s", p.Name, i, fmtWant(v.Want))
	case oc.firstNaN >= 0:
		v.Reason = fmt.Sprintf("nonfinite: %s[%d] = %s, want %s", p.Name, i, fmtGot(g), fmtWant(v.Want))
	default:
		v.Reason = fmt.Sprintf("bound: %s[%d] = %s, want %s ± %s (%d of %d elements outside)",
			p.Name, i, fmtGot(g), fmtWant(v.Want), fmtBound(v.Bound), oc.bad, oc.n)
	}
	return v
}

// compareIndex checks one i64 output: exactly, or under the standard
// ranking contract of topk and sort, by the contract (docs/oracle.md,
// "Selection").
func compareIndex(c Case, p Param, k int, exp []Expected, outputs []Tensor, ins []Param, inputs func() []Tensor) Verdict {
	got, want := outputs[k].I, exp[k].WantI
	v := Verdict{Pass: true, Index: -1}
	bad := func(i int, reason string) Verdict {
		return Verdict{Reason: reason, Output: p.Name, Index: i, Got: float64(got[i]), Want: float64(want[i])}
	}
	if (c.Op == "topk" || c.Op == "sort") && c.Ranking == RankingStandard {
		in := inputs()
		if len(in) != len(ins) {
			return Verdict{Reason: "reference: could not regenerate the inputs for the ranking contract", Output: p.Name, Index: -1}
		}
		x, vals := in[0].F, outputs[0].F
		N := c.Dims["N"]
		K := len(got) / c.Dims["M"]
		for r := 0; r < c.Dims["M"]; r++ {
			seen := map[int64]int{}
			for j := 0; j < K; j++ {
				i := r*K + j
				id := got[i]
				if id < 0 || id >= int64(N) {
					return bad(i, fmt.Sprintf("rank: %s[%d] = %d, want an index in [0, %d)", p.Name, i, id, N))
				}
				if prev, ok := seen[id]; ok {
					return bad(i, fmt.Sprintf("rank: %s[%d] = %d repeats %s[%d]", p.Name, i, id, p.Name, prev))
				}
				seen[id] = i
				if xv := x[r*N+int(id)]; math.Float32bits(xv) != math.Float32bits(vals[i]) {
					return bad(i, fmt.Sprintf("rank: %s[%d] = %d points at %s[%d] = %s, want V[%d] = %s (bit-equal)",
						p.Name, i, id, ins[0].Name, r*N+int(id), fmtGot(xv), i, fmtGot(vals[i])))
				}
			}
		}
		return v
	}
	nbad, firstBad := 0, -1
	for i := range got {
		if got[i] != want[i] {
			nbad++
			if firstBad < 0 {
				firstBad = i
			}
		}
	}
	if nbad == 0 {
		return v
	}
	zeros, constant := true, len(got) > 1
	for _, g := range got {
		zeros = zeros && g == 0
		constant = constant && g == got[0]
	}
	switch {
	case zeros:
		return bad(0, fmt.Sprintf("trivial: %s is all zeros", p.Name))
	case constant:
		return bad(0, fmt.Sprintf("trivial: %s is constant %d", p.Name, got[0]))
	}
	return bad(firstBad, fmt.Sprintf("index: %s[%d] = %d, want %d (%d of %d elements differ)", p.Name, firstBad, got[firstBad], want[firstBad], nbad, len(got)))
}

// scan compares every element of out, output number k.
func scan(k int, name string, out []float32, want, bound []float64) outputCheck {
	oc := outputCheck{name: name, k: k, n: len(out), firstBad: -1, firstNaN: -1}
	var mu sync.Mutex
	parallel(len(out), 1, func(lo, hi int) {
		c := scanRange(out, want, bound, lo, hi)
		mu.Lock()
		defer mu.Unlock()
		oc.bad += c.bad
		oc.maxRatio = math.Max(oc.maxRatio, c.maxRatio)
		if c.firstBad >= 0 && (oc.firstBad < 0 || c.firstBad < oc.firstBad) {
			oc.firstBad = c.firstBad
		}
		if c.firstNaN >= 0 && (oc.firstNaN < 0 || c.firstNaN < oc.firstNaN) {
			oc.firstNaN = c.firstNaN
		}
	})
	return oc
}

// scanRange is scan of elements lo..hi-1 (indices stay the whole output's).
func scanRange(out []float32, want, bound []float64, lo, hi int) outputCheck {
	oc := outputCheck{firstBad: -1, firstNaN: -1}
	for i := lo; i < hi; i++ {
		g32 := out[i]
		g, w, b := float64(g32), want[i], bound[i]
		if math.IsNaN(g) || math.IsInf(g, 0) {
			if g == w {
				continue // an infinite reference matched exactly
			}
			oc.bad++
			if oc.firstNaN < 0 {
				oc.firstNaN = i
			}
			continue
		}
		d := math.Abs(g - w)
		if d <= b {
			if b > 0 && !math.IsInf(b, 1) {
				oc.maxRatio = math.Max(oc.maxRatio, d/b)
			}
			continue
		}
		// Outside: d > b, or d is NaN because the reference is not finite.
		switch {
		case b > 0 && !math.IsNaN(d):
			oc.maxRatio = math.Max(oc.maxRatio, d/b)
		default:
			oc.maxRatio = math.MaxFloat64 // a difference where the result is exact
		}
		oc.bad++
		if oc.firstBad < 0 {
			oc.firstBad = i
		}
	}
	return oc
}

// trivial names an output that fails because it is a trivial fill: all
// zeros, one constant, or a byte-for-byte copy of an input of the same
// size. It is called only for an output with elements outside their
// bounds, so such a fill is reported only when the reference rules it out.
func trivial(name string, out []float32, ins []Param, inputs func() []Tensor) string {
	if len(out) == 0 {
		return ""
	}
	first := out[0]
	zeros, constant := true, len(out) > 1 && first == first
	for _, g := range out {
		if g != 0 {
			zeros = false
		}
		if math.Float32bits(g) != math.Float32bits(first) {
			constant = false
		}
	}
	switch {
	case zeros:
		return fmt.Sprintf("trivial: %s is all zeros", name)
	case constant:
		return fmt.Sprintf("trivial: %s is constant %s", name, fmtGot(first))
	}
	var in []Tensor
	for k, p := range ins {
		if p.Elems() != len(out) || p.Dtype == "i64" {
			continue
		}
		if in == nil {
			if in = inputs(); len(in) != len(ins) {
				return ""
			}
		}
		if sameBits(in[k].F, out) {
			return fmt.Sprintf("trivial: %s is a copy of input %s", name, p.Name)
		}
	}
	return ""
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// fmtGot prints a binary32 output value in its shortest exact form.
func fmtGot(g float32) string {
	switch {
	case math.IsInf(float64(g), 1):
		return "+Inf"
	case math.IsInf(float64(g), -1):
		return "-Inf"
	}
	return strconv.FormatFloat(float64(g), 'g', -1, 32)
}

// fmtWant prints a reference value with 9 significant digits, enough to
// tell any two binary32 values apart.
func fmtWant(w float64) string { return strconv.FormatFloat(w, 'g', 9, 64) }

// fmtBound prints a bound with 3 significant digits.
func fmtBound(b float64) string { return strconv.FormatFloat(b, 'g', 3, 64) }
