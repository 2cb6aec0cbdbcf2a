//go:build cgo

package oracle

import (
	"runtime"
	"testing"
)

// cgoBuild: this test binary's dgemm is OpenBLAS's.
const cgoBuild = true

// BenchmarkOpenBLASDgemmTwice is BenchmarkRefGemm's anchor (issue 12:
// within 2x of it): two cblas_dgemm calls of the same size on the same
// inputs, already widened to float64, each with OpenBLAS's own threads
// on every core (the library at its best); nothing else.
func BenchmarkOpenBLASDgemmTwice(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(benchName(n), func(b *testing.B) {
			in := benchInputs(b, n)
			a64, b64 := widen(in[0].F), widen(in[1].F)
			c := make([]float64, n*n)
			for b.Loop() {
				dgemmOpenBLASThreaded(runtime.GOMAXPROCS(0), n, n, n, a64, b64, c)
				dgemmOpenBLASThreaded(runtime.GOMAXPROCS(0), n, n, n, a64, b64, c)
			}
		})
	}
}
