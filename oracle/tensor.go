package oracle

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Tensor is one dense row-major tensor of a case. Float tensors (f32, f16,
// bf16) hold their values in F as float32; for f16 and bf16 every value is
// exactly representable in that format. Index tensors (i64) hold I.
type Tensor struct {
	Dtype string
	F     []float32
	I     []int64
}

// Len is the number of elements of t.
func (t Tensor) Len() int {
	if t.Dtype == "i64" {
		return len(t.I)
	}
	return len(t.F)
}

// F32 wraps float32 values as an f32 tensor.
func F32(x []float32) Tensor { return Tensor{Dtype: "f32", F: x} }

// I64 wraps int64 values as an i64 tensor.
func I64(x []int64) Tensor { return Tensor{Dtype: "i64", I: x} }

// Expected is the reference of one output. A float output has Want and
// Bound (|got - want| <= bound per element); an i64 output has WantI, which
// must match exactly, except where a ranking contract admits other indices
// (docs/oracle.md, "Selection").
type Expected struct {
	Want  []float64
	Bound []float64
	WantI []int64
}

// Encode returns the raw little-endian storage bytes of t: binary32,
// binary16 (f16), bfloat16 (bf16) or int64. Float values are rounded to the
// storage format to nearest, ties to even (values that came from
// [Generate] or [Decode] are already representable and convert exactly).
func Encode(t Tensor) []byte {
	switch t.Dtype {
	case "i64":
		b := make([]byte, 8*len(t.I))
		for i, v := range t.I {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
		return b
	case "f16", "bf16":
		b := make([]byte, 2*len(t.F))
		for i, v := range t.F {
			var h uint16
			if t.Dtype == "f16" {
				h = f16Bits(v)
			} else {
				h = bf16Bits(v)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	b := make([]byte, 4*len(t.F))
	for i, v := range t.F {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// Decode reads raw little-endian storage bytes of dtype f32, f16, bf16 or
// i64 (see [Encode]); every f16 and bf16 value converts to float32 exactly.
func Decode(dtype string, b []byte) (Tensor, error) {
	size := DtypeSize(dtype)
	if size == 0 || dtype == "f64" {
		return Tensor{}, fmt.Errorf("decode: dtype %q: want f32, f16, bf16 or i64", dtype)
	}
	if len(b)%size != 0 {
		return Tensor{}, fmt.Errorf("decode: %d bytes is not a whole number of %s elements", len(b), dtype)
	}
	n := len(b) / size
	t := Tensor{Dtype: dtype}
	switch dtype {
	case "i64":
		t.I = make([]int64, n)
		for i := range t.I {
			t.I[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case "f16", "bf16":
		t.F = make([]float32, n)
		for i := range t.F {
			h := binary.LittleEndian.Uint16(b[2*i:])
			if dtype == "f16" {
				t.F[i] = f16Value(h)
			} else {
				t.F[i] = math.Float32frombits(uint32(h) << 16)
			}
		}
	default:
		t.F = make([]float32, n)
		for i := range t.F {
			t.F[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return t, nil
}

// bf16Bits rounds a binary32 value to bfloat16, to nearest, ties to even;
// NaN stays a (quiet) NaN.
func bf16Bits(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// f16Bits rounds a binary32 value to IEEE binary16, to nearest, ties to
// even, with gradual underflow and overflow to infinity.
func f16Bits(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xFF
	man := b & 0x7FFFFF
	switch {
	case exp == 0xFF && man != 0:
		return sign | 0x7E00 | uint16(man>>13)
	case exp == 0xFF:
		return sign | 0x7C00
	}
	// The value is m * 2^(e) with m the 24-bit significand.
	e := exp - 127
	if e > 15 {
		return sign | 0x7C00
	}
	m := man
	if exp != 0 {
		m |= 1 << 23
	} else {
		e = -126
	}
	// Target: a binary16 significand with 10 fraction bits at exponent e
	// (normal, e >= -14) or a subnormal at exponent -14.
	shift := 13
	if e < -14 {
		shift += -14 - e
	}
	if shift > 24+1 {
		return sign
	}
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	if e < -14 {
		// Subnormal (q may carry into the smallest normal: 0x400 is right).
		return sign | uint16(q)
	}
	// Normal: q holds the implicit bit at 1<<10; a carry to 1<<11 bumps
	// the exponent.
	be := uint32(e + 15)
	if q >= 1<<11 {
		q >>= 1
		be++
	}
	if be >= 31 {
		return sign | 0x7C00
	}
	return sign | uint16(be<<10) | uint16(q&0x3FF)
}

// f16Value converts binary16 bits to float32 exactly.
func f16Value(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := int(h>>10) & 0x1F
	man := uint32(h & 0x3FF)
	switch {
	case exp == 0x1F && man == 0:
		return math.Float32frombits(sign | 0x7F800000)
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7FC00000 | man<<13)
	case exp == 0:
		v := float32(man) * 0x1p-24
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | man<<13)
}

// toStorage rounds a binary32 value to the storage dtype and back.
func toStorage(dtype string, v float32) float32 {
	switch dtype {
	case "f16":
		return f16Value(f16Bits(v))
	case "bf16":
		return math.Float32frombits(uint32(bf16Bits(v)) << 16)
	}
	return v
}

// storage describes a float storage format for the bounds: its unit
// roundoff, the smallest normal magnitude (the most a flushed or
// subnormal rounding can lose), and the largest finite value.
type storage struct {
	unit, tiny, max float64
}

func storageOf(dtype string) storage {
	switch dtype {
	case "f16":
		return storage{0x1p-11, 0x1p-14, 65504}
	case "bf16":
		return storage{0x1p-8, 0x1p-126, math.Float64frombits(0x47EFE00000000000)}
	}
	return storage{unit, tiny, math.MaxFloat32}
}

// representable reports whether v is exactly a value of the storage dtype.
func representable(dtype string, v float64) bool {
	f := float32(v)
	if float64(f) != v {
		return false
	}
	return toStorage(dtype, f) == f
}
