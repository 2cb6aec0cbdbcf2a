package oracle

import (
	"fmt"
	"math"
	"strconv"
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
func Check(c Case, outputs [][]float32) (Verdict, error) {
	inputs, err := Generate(c)
	if err != nil {
		return Verdict{}, err
	}
	want, bound, err := Reference(c, inputs)
	if err != nil {
		return Verdict{}, err
	}
	return compare(c, func() [][]float32 { return inputs }, want, bound, outputs), nil
}

// Compare checks every element of outputs (one per output param of
// [Signature](c), in signature order) against expected ± bound from
// [Reference]. It regenerates the inputs of c only when an output fails,
// to tell whether the output is a copy of one.
func Compare(c Case, expected, bound [][]float64, outputs [][]float32) Verdict {
	return compare(c, func() [][]float32 {
		in, err := Generate(c)
		if err != nil {
			return nil
		}
		return in
	}, expected, bound, outputs)
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

func compare(c Case, inputs func() [][]float32, expected, bound [][]float64, outputs [][]float32) Verdict {
	fail := func(reason string) Verdict { return Verdict{Reason: reason, Index: -1} }
	sig, err := Signature(c)
	if err != nil {
		return fail(err.Error()) // "case ID: ..." from Validate
	}
	var outs, ins []Param
	for _, p := range sig {
		if p.Role == "output" {
			outs = append(outs, p)
		} else {
			ins = append(ins, p)
		}
	}
	if len(outputs) != len(outs) {
		return fail(fmt.Sprintf("outputs: got %d tensors, want %d", len(outputs), len(outs)))
	}
	if len(expected) != len(outs) || len(bound) != len(outs) {
		return fail(fmt.Sprintf("reference: got %d expected and %d bound tensors, want %d", len(expected), len(bound), len(outs)))
	}
	v := Verdict{Pass: true, Index: -1}
	var failed *outputCheck
	var failedOut []float32
	for k, p := range outs {
		n := p.Elems()
		if len(outputs[k]) != n {
			return fail(fmt.Sprintf("length: %s has %d elements, want %d", p.Name, len(outputs[k]), n))
		}
		if len(expected[k]) != n || len(bound[k]) != n {
			return fail(fmt.Sprintf("reference: %s has %d expected and %d bound elements, want %d", p.Name, len(expected[k]), len(bound[k]), n))
		}
		oc := scan(k, p.Name, outputs[k], expected[k], bound[k])
		v.Checked += n
		v.MaxRatio = math.Max(v.MaxRatio, oc.maxRatio)
		if failed == nil && oc.bad > 0 {
			failed, failedOut = &oc, outputs[k]
		}
	}
	if failed == nil {
		return v
	}
	v.Pass = false
	v.Output = failed.name
	i := failed.firstNaN
	if i < 0 {
		i = failed.firstBad
	}
	v.Index, v.Got = i, float64(failedOut[i])
	v.Want, v.Bound = expected[failed.k][i], bound[failed.k][i]
	if r := trivial(failed.name, failedOut, ins, inputs); r != "" {
		v.Reason = r
		return v
	}
	switch g := failedOut[i]; {
	case failed.firstNaN >= 0 && g != g:
		v.Reason = fmt.Sprintf("nan: %s[%d] is NaN, want %s", failed.name, i, fmtWant(v.Want))
	case failed.firstNaN >= 0:
		v.Reason = fmt.Sprintf("nonfinite: %s[%d] = %s, want %s", failed.name, i, fmtGot(g), fmtWant(v.Want))
	default:
		v.Reason = fmt.Sprintf("bound: %s[%d] = %s, want %s ± %s (%d of %d elements outside)",
			failed.name, i, fmtGot(g), fmtWant(v.Want), fmtBound(v.Bound), failed.bad, failed.n)
	}
	return v
}

// scan compares every element of out, output number k.
func scan(k int, name string, out []float32, want, bound []float64) outputCheck {
	oc := outputCheck{name: name, k: k, n: len(out), firstBad: -1, firstNaN: -1}
	for i, g32 := range out {
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
func trivial(name string, out []float32, ins []Param, inputs func() [][]float32) string {
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
	var in [][]float32
	for k, p := range ins {
		if p.Elems() != len(out) {
			continue
		}
		if in == nil {
			if in = inputs(); len(in) != len(ins) {
				return ""
			}
		}
		if sameBits(in[k], out) {
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
