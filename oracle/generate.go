package oracle

import (
	"fmt"
	"math"
)

// Generator names the input recipe implemented by [Generate] and specified
// in docs/inputs.md. Stored tensors record it beside the seed; a change to
// any generated bit must change this name.
const Generator = "tilepipe-splitmix64/1"

// Version names the references and bounds [Reference] computes
// (docs/oracle.md). Captures record it; an audit recomputes packets only
// with the same version. A change to any reference or bound bit must
// change it.
//
//	tilepipe-oracle/1: attention charges each key the rescales it can see;
//	softmax and cross_entropy count an online sum's rescales (2026-11-29).
const Version = "tilepipe-oracle/1"

// patterns lists the input patterns [Generate] knows, in documentation order.
var patterns = []string{"normal", "dyadic", "ties", "adversarial", "exact"}

// Patterns lists the input patterns [Generate] knows (docs/inputs.md).
func Patterns() []string { return append([]string(nil), patterns...) }

func knownPattern(p string) bool {
	for _, q := range patterns {
		if p == q {
			return true
		}
	}
	return false
}

// golden is SplitMix64's Weyl increment, 2^64 divided by the golden ratio.
const golden = 0x9E3779B97F4A7C15

// mix64 is SplitMix64's output function (Stafford's Mix13 variant).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// splitmix is one SplitMix64 stream.
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += golden
	return mix64(s.state)
}

// skip is the stream n outputs further on.
func (s splitmix) skip(n int) splitmix { return splitmix{state: s.state + uint64(n)*golden} }

// tensorStream starts the stream of the tensor at position index of the
// signature. Its starting state is output number index+1 (counting from 1)
// of a SplitMix64 stream started at the case seed, so tensors of one case
// start at unrelated points of the Weyl sequence instead of at neighbouring
// ones, which would make them shifted copies of each other.
func tensorStream(seed uint64, index int) splitmix {
	return splitmix{state: mix64(seed + uint64(index+1)*golden)}
}

// Generate returns the inputs of c, one tensor per input param of
// [Signature](c), in signature order. The values depend only on the
// pattern, the seed, the tensor's position in the signature, its element
// count and (for index tensors and half storage) the op's dims and dtype,
// and are specified bit for bit in docs/inputs.md so that any language can
// reproduce them.
func Generate(c Case) ([]Tensor, error) {
	sig, err := Signature(c)
	if err != nil {
		return nil, err
	}
	// draws is how many outputs of the stream each element takes, so a
	// chunk starting at element lo starts lo*draws outputs in (SplitMix64
	// jumps ahead by adding to its state); align keeps fillAdversarial's
	// pairs whole.
	var fill func(*splitmix, []float32)
	draws, align := 1, 1
	switch c.Pattern {
	case "normal":
		fill, draws = fillNormal, 6
	case "dyadic":
		fill = fillDyadic
	case "ties":
		fill = fillTies
	case "adversarial":
		fill, align = fillAdversarial, 2
	case "exact":
		fill = fillExactA
	default:
		// Validate rejects unknown patterns; this guards a new pattern that
		// was added to patterns but not here.
		return nil, fmt.Errorf("case %s: pattern: no generator for %q", c.ID, c.Pattern)
	}
	var inputs []Tensor
	for i, p := range sig {
		if p.Role != RoleInput {
			continue
		}
		r := tensorStream(c.Seed, i)
		if p.Dtype == "i64" {
			// Index tensors ignore the pattern: uniform in [0, n) for the
			// op's index range (targets of cross_entropy, ids of embedding).
			n := c.Dims["N"]
			if c.Op == "embedding" {
				n = c.Dims["V"]
			}
			x := make([]int64, p.Elems())
			for j := range x { // one per row: never large
				x[j] = int64((r.next() >> 32) * uint64(n) >> 32)
			}
			inputs = append(inputs, I64(x))
			continue
		}
		x := make([]float32, p.Elems())
		fill := fill
		if c.Pattern == "exact" && i == 1 { // B (gemv's x): ±1, at most ExactTerms nonzero a dot product
			fill = fillExactB(c.Dims["K"])
		}
		parallel(len(x), align, func(lo, hi int) {
			r := r.skip(lo * draws)
			fill(&r, x[lo:hi])
			if p.Dtype != "f32" {
				for j := lo; j < hi; j++ {
					x[j] = toStorage(p.Dtype, x[j])
				}
			}
		})
		inputs = append(inputs, Tensor{Dtype: p.Dtype, F: x})
	}
	return inputs, nil
}

// fillNormal writes approximately standard normal values: the Irwin–Hall
// sum of twelve 32-bit uniforms, centred. Every step is integer arithmetic
// or an exact float64 operation followed by one round-to-nearest-even
// conversion to float32, so every IEEE 754 language reproduces it bit for
// bit; a Box–Muller transform would depend on the platform's log and cos.
func fillNormal(r *splitmix, x []float32) {
	for i := range x {
		var s uint64
		for k := 0; k < 6; k++ {
			z := r.next()
			s += z>>32 + z&0xFFFFFFFF
		}
		x[i] = float32(float64(int64(s)-6<<32) * 0x1p-32)
	}
}

// fillDyadic writes k/8 for integers k uniform in [-32, 32]: values that
// sums and products represent exactly, so exact arithmetic is checkable.
func fillDyadic(r *splitmix, x []float32) {
	for i := range x {
		k := int64((r.next()>>32)*65>>32) - 32
		x[i] = float32(k) / 8
	}
}

// ExactTerms is the most nonzero terms of a dot product under the exact
// pattern: A's values are multiples of 2^-12 below 1 and B's are ±1 or 0,
// so a dot product of at most 4096 nonzero terms is a multiple of 2^-12
// below 2^12 at every partial sum, exact in binary32 in every order.
const ExactTerms = 4096

// fillExactA writes the exact pattern's A (docs/inputs.md): ±k/4096 for
// an odd k in [2049, 4095], 12 significant bits with the last one set, so
// neither TF32 (11 bits) nor BF16 (8) holds any of them.
func fillExactA(r *splitmix, x []float32) {
	for i := range x {
		z := r.next()
		v := float32(2049+2*((z>>32)&0x3FF)) / 4096
		if z&1 == 1 {
			v = -v
		}
		x[i] = v
	}
}

// fillExactB is the exact pattern's B for a K-term dot product: ±1 by the
// draw's lowest bit, and where K exceeds ExactTerms, 0 unless the draw's
// top 32 bits fall below 3584/K of their range, so a dot product has 3584
// nonzero terms on average and more than ExactTerms almost never (an
// element that has them just gets a bound above 0).
func fillExactB(K int) func(*splitmix, []float32) {
	keep := uint64(1) << 32
	if K > ExactTerms {
		keep = (3584 << 32) / uint64(K)
	}
	return func(r *splitmix, x []float32) {
		for i := range x {
			z := r.next()
			switch {
			case z>>32 >= keep:
				x[i] = 0
			case z&1 == 1:
				x[i] = -1
			default:
				x[i] = 1
			}
		}
	}
}

// fillTies writes k/4 for integers k uniform in [-15, 15], with zero drawn
// as +0 or -0 by the draw's lowest bit: 31 distinct values, so rows of any
// width repeat values and selection ops must resolve ties (and signed
// zeros).
func fillTies(r *splitmix, x []float32) {
	for i := range x {
		z := r.next()
		k := int64((z>>32)*31>>32) - 15
		v := float32(k) / 4
		if k == 0 && z&1 == 1 {
			v = float32(math.Copysign(0, -1))
		}
		x[i] = v
	}
}

// fillAdversarial writes pairs: an even element is ±(m + f/4096) with m
// uniform in [80, 1000] and f in [0, 4096), far beyond where exp overflows
// without max subtraction; the next (odd) element is its negation plus
// k/64, k uniform in [-64, 64], so that sums cancel nearly completely.
// Every value is exact in binary32.
func fillAdversarial(r *splitmix, x []float32) {
	var prev float64
	for i := range x {
		z := r.next()
		var v float64
		if i%2 == 0 {
			m := 80 + float64((z>>32)*921>>32)
			v = m + float64((z>>20)&0xFFF)/4096
			if z&1 == 1 {
				v = -v
			}
		} else {
			k := int64((z>>32)*129>>32) - 64
			v = -prev + float64(k)/64
		}
		prev = v
		x[i] = float32(v)
	}
}
