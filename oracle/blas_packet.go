package oracle

import (
	"fmt"
	"math"
)

// u64 is the unit roundoff of binary64, 2^-53.
const u64 = 0x1p-53

// gamma64 is Higham's γ_n for binary64.
func gamma64(n int) float64 {
	nu := float64(n) * u64
	return nu / (1 - nu)
}

// The tolerances of docs/oracle.md, "Recomputation on another BLAS".
const (
	// evalRel covers evaluating a bound formula twice in float64 at
	// slightly different arguments: a few dozen roundings of sums and
	// products of nonnegative terms, about 2^-47 between the two, and an
	// FMA contraction on one build and not on the other.
	evalRel = 0x1p-44

	// refSlope is how far a bound may move per unit its reference moves:
	// gemm's refined term has slope u(K−1)/2·slack ≤ 2^-11 in |c|, and
	// rounding to half storage adds u_s·|c| with u_s ≤ 2^-8.
	refSlope = 0x1p-7

	// zEval covers the rounding of z = 0.125·c + 0.25 on each build.
	zEval = 0x1p-51

	// geluLip bounds |d/dz gelu(z)| (1.13 for the tanh form) and geluEval
	// the float64 evaluation error of gelu(z) on two builds, each within
	// about 6·2^-53·|z|; the two together bound a gemm_gelu reference's move.
	geluLip  = 1.2
	geluEval = 0x1p-47

	// geluRel and geluSlope bound the move of gemm_gelu's bound, whose
	// input z moves by at most 2^-26 of its own error bar: checked at the
	// corners of that box by TestSamePacketEpilogues, not derived.
	geluRel   = 0x1p-18
	geluSlope = 4
)

// blasOps are the ops whose reference comes from [dgemm]: the only ones
// whose bits depend on the build.
var blasOps = map[string]bool{"gemm": true, "gemm_relu": true, "gemm_gelu": true, "bmm": true, "gemv": true}

// dotTol bounds how far apart two binary64 evaluations, in any summation
// order, of a K-term dot product of exact products can be: each is within
// γ_K·s of the exact sum, s the sum of the products' magnitudes, and s is
// at most ŝ/(1−γ_K) for ŝ, one binary64 evaluation of it. The last factor
// covers evaluating this formula.
func dotTol(K int, s float64) float64 {
	g := gamma64(K)
	return 2 * g / (1 - g) * s * (1 + 0x1p-40)
}

// boundRel is the relative part of a gemm bound's tolerance: s moves by
// at most 2γ_K/(1−γ_K) of itself, and the formula's own roundings.
func boundRel(K int) float64 {
	g := gamma64(K)
	return 2*g/(1-g) + evalRel
}

// PacketError is the first element of a stored packet that [SamePacket]
// does not accept: which tensor and element, both values, the largest
// difference allowed and why.
type PacketError struct {
	Case       string
	Tensor     string // "expected" or "bound"
	Output     string // the output's name, e.g. "C"
	Index      int
	Stored     float64
	Recomputed float64
	Tolerance  float64 // 0: the element must match bit for bit
	Why        string
}

func (e *PacketError) Error() string {
	return fmt.Sprintf("case %s %s %s", e.Case, e.Tensor, e.Detail())
}

// Detail is the message without the case and tensor kind, from the
// element on: for a caller that names those itself.
func (e *PacketError) Detail() string {
	if e.Tolerance == 0 {
		return fmt.Sprintf("%s[%d] = %s, recomputed %s: %s", e.Output, e.Index, num(e.Stored), num(e.Recomputed), e.Why)
	}
	return fmt.Sprintf("%s[%d] = %s, recomputed %s: |difference| %.3g exceeds %.3g (%s)",
		e.Output, e.Index, num(e.Stored), num(e.Recomputed), math.Abs(e.Stored-e.Recomputed), e.Tolerance, e.Why)
}

// num prints a float64 so that it reads back to the same bits.
func num(x float64) string { return fmt.Sprintf("%.17g", x) }

// SamePacket reports whether stored, the [Expected] packet of case c as a
// capture stored it, is a packet [Reference] computes from inputs in on
// some build, given recomputed, what it computes on this one. Index
// outputs and the outputs of ops computed in pure Go must match bit for
// bit. The gemm family's references come from a BLAS ([dgemm]), whose
// summation order differs between builds and CPUs: there a reference
// element may differ by the FP64 rounding of two evaluations, 2·γ_K·s, and
// a bound by what that and its own float64 evaluation move it
// (docs/oracle.md, "Recomputation on another BLAS"); where the reference
// is exact in every order it must match exactly. The error is a
// *[PacketError] naming the first element not accepted, or says why the
// packet's shape is not the oracle's.
func SamePacket(c Case, in []Tensor, stored, recomputed []Expected) error {
	sig, err := Signature(c)
	if err != nil {
		return err
	}
	var outs []Param
	for _, p := range sig {
		if p.Role != RoleInput {
			outs = append(outs, p)
		}
	}
	if len(stored) != len(outs) || len(recomputed) != len(outs) {
		return fmt.Errorf("case %s: %d stored and %d recomputed outputs, the signature has %d", c.ID, len(stored), len(recomputed), len(outs))
	}
	var spread *gemmSpread
	for k, p := range outs {
		st, re := stored[k], recomputed[k]
		if p.Dtype == "i64" {
			if len(st.WantI) != len(re.WantI) {
				return fmt.Errorf("case %s: expected %s has %d values, the oracle makes %d", c.ID, p.Name, len(st.WantI), len(re.WantI))
			}
			for i := range re.WantI {
				if st.WantI[i] != re.WantI[i] {
					return &PacketError{Case: c.ID, Tensor: "expected", Output: p.Name, Index: i,
						Stored: float64(st.WantI[i]), Recomputed: float64(re.WantI[i]), Why: "an index output must match exactly"}
				}
			}
			continue
		}
		if len(st.Want) != len(re.Want) || len(st.Bound) != len(re.Bound) {
			return fmt.Errorf("case %s: output %s has %d expected values and %d bounds, the oracle makes %d and %d",
				c.ID, p.Name, len(st.Want), len(st.Bound), len(re.Want), len(re.Bound))
		}
		for i := range re.Want {
			sw, sb, rw, rb := st.Want[i], st.Bound[i], re.Want[i], re.Bound[i]
			if same(sw, rw) && same(sb, rb) {
				continue
			}
			if !blasOps[c.Op] {
				e := &PacketError{Case: c.ID, Tensor: "expected", Output: p.Name, Index: i, Stored: sw, Recomputed: rw,
					Why: fmt.Sprintf("must match bit for bit (%s is computed in pure Go, the same on every build)", c.Op)}
				if same(sw, rw) {
					e.Tensor, e.Stored, e.Recomputed = "bound", sb, rb
				}
				return e
			}
			if spread == nil {
				if spread, err = newGemmSpread(c, in); err != nil {
					return err
				}
			}
			if e := spread.check(i, sw, sb, rw, rb); e != nil {
				e.Case, e.Output = c.ID, p.Name
				return e
			}
		}
	}
	return nil
}

// same reports whether x and y have the same bits.
func same(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }

// within reports whether x is y or within tol of it (false for NaN).
func within(x, y, tol float64) bool { return same(x, y) || math.Abs(x-y) <= tol }

// gemmSpread holds, per output element of a gemm-family case, what its
// tolerance needs: ŝ = (|A|·|B|)_ij on this build, the power of two below
// which a dot product of the element's grain is exact in every order, and
// for the epilogues the recomputed z = 0.125·c + 0.25.
type gemmSpread struct {
	op, dtype string
	K         int
	s         []float64
	exactExp  []int // ŝ < 2^exactExp: exact in every order
	z         []ev
}

func newGemmSpread(c Case, in []Tensor) (*gemmSpread, error) {
	d := c.Dims
	B, M, N, K := 1, d["M"], d["N"], d["K"]
	switch c.Op {
	case "bmm":
		B = d["B"]
	case "gemv":
		N = 1
	}
	if len(in) < 2 || len(in[0].F) != B*M*K || len(in[1].F) != B*K*N {
		return nil, fmt.Errorf("case %s: inputs are not the case's A and B", c.ID)
	}
	g := &gemmSpread{op: c.Op, dtype: c.Dtype, K: K}
	act := c.Op == "gemm_relu" || c.Op == "gemm_gelu"
	for i := 0; i < B; i++ {
		a, b := in[0].F[i*M*K:(i+1)*M*K], in[1].F[i*K*N:(i+1)*K*N]
		a64, b64 := widen(a), widen(b)
		for j := range a64 {
			a64[j] = math.Abs(a64[j])
		}
		for j := range b64 {
			b64[j] = math.Abs(b64[j])
		}
		s := make([]float64, M*N)
		dgemm(M, N, K, a64, b64, s)
		// Products are multiples of 2^(eA+eB); while s < 2^53 of that
		// grain every partial sum, signed or not, is exact in binary64.
		e := 53 + grainExp(a) + grainExp(b)
		for _, v := range s {
			g.s = append(g.s, v)
			g.exactExp = append(g.exactExp, e)
		}
		if act {
			w, bd := refGemm(M, N, K, a, b, c.Policy)
			for j := range w {
				g.z = append(g.z, epilogueInput(w[j], bd[j]))
			}
		}
	}
	return g, nil
}

// epilogueInput is z = 0.125·c + 0.25 with its error bar, as refGemmAct
// computes it.
func epilogueInput(w, bd float64) ev { return evAdd(evScale(ev{w, bd}, 0.125), cnst(0.25)) }

// storeBound is Reference's rounding of a bound to half storage.
func storeBound(dtype string, w, b float64) float64 {
	if dtype == "f32" || dtype == "" {
		return b
	}
	return toStore(dtype, ev{w, b}).e
}

// elemTol is how far element i's stored value and bound may be from the
// recomputed ones, and why.
type elemTol struct {
	want, bound   float64
	wantWhy, bWhy string
	exact         string // why the element must match bit for bit, or ""
	z             ev     // the epilogues' recomputed input
	tz, rel       float64
}

// tol is element i's tolerance, rb its recomputed bound.
func (g *gemmSpread) tol(i int, rb float64) elemTol {
	K, s := g.K, g.s[i]
	t := elemTol{rel: boundRel(K)}
	// tc: how far the gemm reference c may move.
	tc, cWhy := dotTol(K, s), fmt.Sprintf("two FP64 evaluations of a %d-term dot product differ by at most 2·γ_%d(2^-53)·s, s = %.6g", K, K, s)
	if s < math.Ldexp(1, g.exactExp[i]) {
		tc = 0
		t.exact = fmt.Sprintf("must match bit for bit: exact in every summation order, s = %.6g < 2^%d", s, g.exactExp[i])
	}
	t.want, t.wantWhy = tc, cWhy
	t.bound, t.bWhy = t.rel*math.Abs(rb)+refSlope*tc, fmt.Sprintf("%.3g relative as s moves, plus 2^-7 times the reference's %.3g", t.rel, tc)
	if g.op != "gemm_relu" && g.op != "gemm_gelu" {
		return t
	}
	// tz: how far the epilogue's input z = c/8 + 1/4 may move.
	t.z = g.z[i]
	t.tz = 0.125 * tc
	if tc > 0 {
		t.tz += zEval * math.Abs(t.z.v)
	}
	if g.op == "gemm_gelu" {
		t.want = geluLip*t.tz + geluEval*math.Abs(t.z.v)
		t.wantWhy = fmt.Sprintf("gelu's slope 1.2 times z's move %.3g, plus 2^-47·|z| for evaluating gelu; c: %s", t.tz, cWhy)
		t.bound, t.bWhy = geluRel*math.Abs(rb)+geluSlope*t.tz, fmt.Sprintf("2^-18 relative, plus 4 times z's move %.3g", t.tz)
		return t
	}
	t.want, t.wantWhy = t.tz, fmt.Sprintf("relu is 1-Lipschitz and z = c/8 + 1/4 moves by %.3g; c: %s", t.tz, cWhy)
	t.bound, t.bWhy = t.rel*math.Abs(rb)+refSlope*t.tz, fmt.Sprintf("%.3g relative as s moves, plus 2^-7 times z's move %.3g", t.rel, t.tz)
	if rb == 0 {
		// Surely negative: the bound is 0 on every build, unless z + e_z
		// is within z's move of 0 (check's edge case).
		t.bound, t.bWhy = 0, fmt.Sprintf("z + e_z = %.3g is surely negative: the output is exactly 0", t.z.v+t.z.e)
	}
	return t
}

// check judges element i: stored sw, sb against recomputed rw, rb.
func (g *gemmSpread) check(i int, sw, sb, rw, rb float64) *PacketError {
	t := g.tol(i, rb)
	if !within(sw, rw, t.want) {
		why := t.wantWhy
		if t.want == 0 {
			why = t.exact
		}
		return &PacketError{Tensor: "expected", Index: i, Stored: sw, Recomputed: rw, Tolerance: t.want, Why: why}
	}
	if within(sb, rb, t.bound) {
		return nil
	}
	if z := t.z; g.op == "gemm_relu" && math.Abs(z.v+z.e) <= t.tz+t.rel*z.e+refSlope*t.tz {
		// relu's bound jumps between 0 and e_z where z + e_z crosses 0:
		// within z's move of that edge, the other side's is the oracle's too.
		alt := 0.0
		if rb == 0 {
			alt = storeBound(g.dtype, 0, finite(z.e*slack))
		}
		if within(sb, alt, t.rel*alt+refSlope*t.tz) {
			return nil
		}
	}
	why := t.bWhy
	if t.bound == 0 && t.exact != "" {
		why = t.exact
	}
	return &PacketError{Tensor: "bound", Index: i, Stored: sb, Recomputed: rb, Tolerance: t.bound, Why: why}
}
