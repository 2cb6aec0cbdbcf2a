// Package oracle generates a case's inputs, computes its FP64 reference
// with a per-element error bound, and checks binary32 outputs against it.
// It depends on nothing but the standard library, gonum and, where cgo is
// on, OpenBLAS's cblas_dgemm (-lopenblas), so every stage and the audit
// can recompute it.
//
// # Case
//
// A [Case] is one operator at one size with one input recipe: op, dims,
// dtype, pattern, seed, numeric policy and parameters such as eps.
// [Case.Validate] rejects unknown ops and patterns, missing dimensions and
// sizes beyond [MaxDim] and [MaxElems].
//
// # Signature
//
// The signature of a case ([Signature]) is the ordered list of its tensors
// ([Param]): inputs first, then outputs, each dense and row-major, float
// tensors in the case's storage dtype (f32, f16 or bf16) and index tensors
// i64. Routes implement exactly this order; docs/protocol.md lists it per
// op. A [Tensor] carries one such tensor's values; [Encode] and [Decode]
// convert them to and from raw storage bytes.
//
// # Generator
//
// [Generate] produces the inputs from the pattern and seed alone, with
// SplitMix64 streams and only exactly-rounded arithmetic, so any language
// reproduces them bit for bit (docs/inputs.md). [Generator] names the
// recipe; [Patterns] lists the patterns.
//
// # Reference
//
// [Reference] computes the exact-math result of the op on the stored
// inputs, in float64 (a BLAS dgemm for the gemm family: OpenBLAS where cgo
// is on, gonum's pure-Go Dgemm in a CGO_ENABLED=0 build; [BLAS] names
// which), as one [Expected] per
// output: values and bounds for a float output, exact indices for an i64
// output. The float64 value is the
// centre of the acceptance interval, not a binary32 answer to match bit for
// bit.
//
// # Bound
//
// Beside each reference element, [Reference] returns a bound B with
// |y32 - y| <= B for every binary32 implementation y32 that keeps the
// error model of docs/oracle.md: round-to-nearest operations in any
// evaluation order (sequential, pairwise, blocked, SIMD lanes, split
// reductions, with or without FMA, or wider accumulators), exp, division
// and reciprocal square root within stated ulp allowances, and subnormals
// either kept or flushed. Where the exact result is provably produced by
// any such order (dyadic inputs to gemm, sum, add) the bound is 0. A bound
// of +Inf means "no guarantee" and is produced only for inputs outside the
// derivations' domain (docs/oracle.md, "Limits").
//
// # Verdict
//
// [Compare] checks every element of every output against expected ± bound
// and returns a [Verdict]: pass, or the first failure with a one-line
// reason (nan, nonfinite, bound, trivial, length), plus the largest
// error-to-bound ratio seen. [Check] regenerates inputs and reference
// first. Reasons are specified in docs/oracle.md, "Verdicts".
//
// # Packet
//
// The [Expected] values of a case, as capture stores them, are its
// packet. Two builds compute the same packet bit for bit except for the
// gemm family, whose sums a BLAS orders as it likes: [SamePacket] accepts
// a stored packet when it is what some build computes, every reference
// within the FP64 rounding of two evaluations and every bound within what
// that moves it, and otherwise names the first element that is not, as a
// [PacketError] (docs/oracle.md, "Recomputation on another BLAS").
package oracle
