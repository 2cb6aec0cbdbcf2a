package oracle

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// benchSizes are the gemm sizes n³ of the oracle's benchmarks (issue 12:
// refGemm at 4096³ within 2x of two OpenBLAS dgemm calls).
var benchSizes = []int{512, 1024, 4096}

func benchName(n int) string { return fmt.Sprintf("n=%d", n) }

var benchIn sync.Map // n -> []Tensor

// benchInputs are the normal-pattern inputs of gemm n×n×n, generated once
// per test binary.
func benchInputs(b *testing.B, n int) []Tensor {
	if in, ok := benchIn.Load(n); ok {
		return in.([]Tensor)
	}
	in, err := Generate(testCase("gemm", "normal", 1, map[string]int{"M": n, "N": n, "K": n}))
	if err != nil {
		b.Fatal(err)
	}
	benchIn.Store(n, in)
	return in
}

// gonum4096 is set (TILEPIPE_BENCH_GONUM_4096=1) to bench gonum at 4096³
// too: about 35 s per refGemm on the 2-core development machine.
var gonum4096 = os.Getenv("TILEPIPE_BENCH_GONUM_4096") == "1"

// BenchmarkRefGemm is the real refGemm, reference and bound (both
// products, the widening, the absolute values and every element's bound),
// with this build's dgemm; BenchmarkOpenBLASDgemmTwice (cgo builds) is its
// anchor.
func BenchmarkRefGemm(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(benchName(n), func(b *testing.B) {
			if n == 4096 && !cgoBuild && !gonum4096 {
				b.Skip("gonum at 4096³ takes about 35 s per op; TILEPIPE_BENCH_GONUM_4096=1 runs it")
			}
			benchRefGemm(b, n)
		})
	}
}

// BenchmarkRefGemmGonum is refGemm with gonum's Dgemm in any build: the
// oracle before issue 12, beside BenchmarkRefGemm in the same run.
func BenchmarkRefGemmGonum(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(benchName(n), func(b *testing.B) {
			if n == 4096 && !gonum4096 {
				b.Skip("gonum at 4096³ takes about 35 s per op; TILEPIPE_BENCH_GONUM_4096=1 runs it")
			}
			withGonum(func() { benchRefGemm(b, n) })
		})
	}
}

func benchRefGemm(b *testing.B, n int) {
	in := benchInputs(b, n)
	for b.Loop() {
		refGemm(n, n, n, in[0].F, in[1].F, PolicyStrict)
	}
}

// BenchmarkGonumDgemmTwice is two gonum Dgemm calls on widened inputs:
// the before's own anchor.
func BenchmarkGonumDgemmTwice(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(benchName(n), func(b *testing.B) {
			if n == 4096 && !gonum4096 {
				b.Skip("gonum at 4096³ takes about 35 s per op; TILEPIPE_BENCH_GONUM_4096=1 runs it")
			}
			in := benchInputs(b, n)
			a64, b64 := widen(in[0].F), widen(in[1].F)
			c := make([]float64, n*n)
			for b.Loop() {
				dgemmGo(n, n, n, a64, b64, c)
				dgemmGo(n, n, n, a64, b64, c)
			}
		})
	}
}
