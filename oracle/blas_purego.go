//go:build !cgo

package oracle

// dgemm is gonum's pure-Go Dgemm where cgo is off: a static binary with no
// C library to load (docs/gpu.md). Its results differ from OpenBLAS's in
// the last bits; [SamePacket] accepts either.
var dgemm = dgemmGo

// BLAS names the Dgemm this build's [Reference] uses for the gemm family.
func BLAS() string { return "gonum (pure Go)" }
