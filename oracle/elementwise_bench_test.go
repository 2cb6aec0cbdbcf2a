package oracle

import "testing"

// The elementwise oracle against the machine's memory speed (issue 12:
// "other ops at memory speed"), on add of 2^24 elements (64 MiB a
// tensor). Every benchmark reports MB/s over the bytes it must move:
//
//   - BenchmarkAddReference: Reference (input checks, a+b, every
//     element's bound, the overflow check): reads A and B (8 bytes an
//     element), writes want and bound (16).
//   - BenchmarkAddCompare: Compare of a passing output: reads the output,
//     want and bound (20 bytes an element).
//   - BenchmarkAddGenerate: Generate (normal pattern): writes A and B (8).
//   - BenchmarkMemoryWrite and BenchmarkMemoryRead: the anchors, one
//     goroutine moving the same bytes with nothing else to do: allocating
//     want and bound and writing a+b and 0 into them; summing output, want
//     and bound.
//
// Each oracle benchmark's MB/s over its anchor's, measured in one run, is
// the ratio docs/results/ reports.
const addElems = 1 << 24

func addCase() Case {
	return testCase("add", "normal", 5, map[string]int{"M": 4096, "N": 4096})
}

func addInputs(b *testing.B) ([]Tensor, []Expected, []Tensor) {
	b.Helper()
	c := addCase()
	in, err := Generate(c)
	if err != nil {
		b.Fatal(err)
	}
	exp, err := Reference(c, in)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]float32, addElems)
	for i := range out {
		out[i] = float32(exp[0].Want[i])
	}
	return in, exp, []Tensor{{Dtype: "f32", F: out}}
}

func BenchmarkAddGenerate(b *testing.B) {
	c := addCase()
	b.SetBytes(8 * addElems)
	for b.Loop() {
		if _, err := Generate(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddReference(b *testing.B) {
	c := addCase()
	in, _, _ := addInputs(b)
	b.SetBytes(24 * addElems)
	for b.Loop() {
		if _, err := Reference(c, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddCompare(b *testing.B) {
	c := addCase()
	_, exp, out := addInputs(b)
	b.SetBytes(20 * addElems)
	for b.Loop() {
		if v := Compare(c, exp, out); !v.Pass {
			b.Fatal(v.Reason)
		}
	}
}

var sinkF []float64
var sinkS float64

func BenchmarkMemoryWrite(b *testing.B) {
	in, _, _ := addInputs(b)
	x, y := in[0].F, in[1].F
	b.SetBytes(24 * addElems)
	for b.Loop() {
		want, bnd := make([]float64, addElems), make([]float64, addElems)
		for i := range want {
			want[i], bnd[i] = float64(x[i])+float64(y[i]), 0
		}
		sinkF = bnd
	}
}

func BenchmarkMemoryRead(b *testing.B) {
	_, exp, out := addInputs(b)
	o, w, d := out[0].F, exp[0].Want, exp[0].Bound
	b.SetBytes(20 * addElems)
	for b.Loop() {
		s := 0.0
		for i := range o {
			s += float64(o[i]) - w[i] + d[i]
		}
		sinkS = s
	}
}
