package oracle

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// dgemmGo sets c = a·b for row-major a (M×K), b (K×N) and c (M×N) with
// gonum's pure-Go Dgemm. It is compiled into every build: it is [dgemm]
// where cgo is off (the static CGO_ENABLED=0 build of the GPU machine), and
// the tests compute with it the packet such a build captures.
func dgemmGo(M, N, K int, a, b, c []float64) {
	if M == 0 || N == 0 {
		return
	}
	if K == 0 {
		clear(c[:M*N])
		return
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas64.General{Rows: M, Cols: K, Data: a, Stride: K},
		blas64.General{Rows: K, Cols: N, Data: b, Stride: N},
		0, blas64.General{Rows: M, Cols: N, Data: c, Stride: N})
}
