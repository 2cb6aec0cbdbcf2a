package oracle

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// The error model of docs/oracle.md. Every bound is derived from these
// constants; changing one changes what "strict" admits.
const (
	// unit is the unit roundoff of binary32 round-to-nearest, 2^-24.
	unit = 0x1p-24

	// tiny is the smallest normal binary32 value. An implementation that
	// flushes subnormal results to zero loses at most tiny per rounding.
	tiny = 0x1p-126

	// expBase and expSlope bound a binary32 exp: for an fp32 argument d,
	// |exp32(d) - e^d| <= (expBase + expSlope*|d|) * unit * e^d, that is
	// 4 ulp plus 1 ulp per unit of |d|. The slope admits implementations
	// that reduce the argument as fl(d*log2(e)) before a base-2 exponential.
	expBase  = 8
	expSlope = 2

	// divRel bounds the relative error of a quotient a/b: 4 ulp, which
	// covers a correctly rounded division (1/2 ulp), a*fl(1/b) (1 ulp) and
	// an approximate reciprocal refined by one Newton step then multiplied.
	divRel = 8 * unit

	// rsqrtRel bounds the relative error of 1/sqrt(v) for a binary32 v:
	// 2^-21 (4 ulp), which covers 1/fl(sqrt(v)), a correctly rounded
	// rsqrt and a hardware estimate refined by one Newton step.
	rsqrtRel = 0x1p-21

	// slack multiplies every bound. It covers the float64 reference's own
	// error and the rounding in evaluating the bound formulas, both at
	// most 2^-15 of the binary32 bound for dimensions up to MaxDim.
	slack = 1 + 0x1p-14
)

// gamma is Higham's gamma_n = n*u/(1-n*u) for binary32.
func gamma(n int) float64 {
	nu := float64(n) * unit
	return nu / (1 - nu)
}

// Reference computes the exact-math result of c on inputs in float64 and,
// per element, a bound on how far any conforming implementation may be
// from it: one [Expected] per output param of [Signature](c), in signature
// order. docs/oracle.md derives every bound. inputs must be what
// [Generate] returns for c, or at least have its dtypes and shapes, finite
// values representable in their storage dtype, and indices in range.
func Reference(c Case, inputs []Tensor) ([]Expected, error) {
	sig, err := Signature(c)
	if err != nil {
		return nil, err
	}
	var in, outs []Param
	for _, p := range sig {
		if p.Role == RoleInput {
			in = append(in, p)
		} else {
			outs = append(outs, p)
		}
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("case %s: reference: %s", c.ID, fmt.Sprintf(format, a...))
	}
	if len(inputs) != len(in) {
		return nil, fail("got %d inputs, want %d", len(inputs), len(in))
	}
	for i, p := range in {
		if why := checkInput(c, p, inputs[i]); why != "" {
			return nil, fail("%s", why)
		}
	}
	exp, ok := reference(c, inputs)
	if !ok {
		return nil, fail("op %s not implemented yet", c.Op)
	}
	if len(exp) != len(outs) {
		return nil, fail("op %s gave %d outputs, want %d", c.Op, len(exp), len(outs))
	}
	for k, p := range outs {
		e := &exp[k]
		if p.Dtype == "i64" {
			continue
		}
		s := storageOf(p.Dtype)
		if p.Dtype != "f32" && c.Dtype != "f32" {
			parallel(len(e.Want), 1, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					e.Bound[i] = toStore(p.Dtype, ev{e.Want[i], e.Bound[i]}).e
				}
			})
		}
		if i := firstIndex(len(e.Want), func(lo, hi int) int {
			for i := lo; i < hi; i++ {
				if math.Abs(e.Want[i]) > s.max {
					return i
				}
			}
			return -1
		}); i >= 0 {
			return nil, fail("output %s[%d] = %.9g overflows %s storage", p.Name, i, e.Want[i], p.Dtype)
		}
	}
	return exp, nil
}

// checkInput says what is wrong with input t of param p ("" for
// nothing): its dtype or length, a value that is not finite or not of
// the dtype's storage, an id or target out of range.
func checkInput(c Case, p Param, t Tensor) string {
	if t.Dtype != p.Dtype {
		return fmt.Sprintf("input %s has dtype %s, want %s", p.Name, t.Dtype, p.Dtype)
	}
	if t.Len() != p.Elems() {
		return fmt.Sprintf("input %s has %d elements, want %d", p.Name, t.Len(), p.Elems())
	}
	x := t.F
	if j := firstIndex(len(x), func(lo, hi int) int {
		for j := lo; j < hi; j++ {
			if math.Float32bits(x[j])&0x7f800000 == 0x7f800000 { // NaN or infinite
				return j
			}
		}
		return -1
	}); j >= 0 {
		return fmt.Sprintf("input %s[%d] = %v, want a finite value", p.Name, j, x[j])
	}
	if p.Dtype != "f32" {
		if j := firstIndex(len(x), func(lo, hi int) int {
			for j := lo; j < hi; j++ {
				if toStorage(p.Dtype, x[j]) != x[j] {
					return j
				}
			}
			return -1
		}); j >= 0 {
			return fmt.Sprintf("input %s[%d] = %v, not a %s value", p.Name, j, x[j], p.Dtype)
		}
	}
	if p.Dtype == "i64" {
		n, what := c.Dims["N"], "a target"
		if c.Op == "embedding" {
			n, what = c.Dims["V"], "an id"
		}
		for j, v := range t.I {
			if v < 0 || v >= int64(n) {
				return fmt.Sprintf("input %s[%d] = %d, want %s in [0, %d)", p.Name, j, v, what, n)
			}
		}
	}
	return ""
}

// reference is op's FP64 outputs and bounds for the checked inputs; false
// for an op it does not know.
func reference(c Case, inputs []Tensor) ([]Expected, bool) {
	f := func(k int) []float32 { return inputs[k].F }
	d := c.Dims
	M, N, K := d["M"], d["N"], d["K"]
	one := func(want, bnd []float64) []Expected { return []Expected{{Want: want, Bound: bnd}} }
	switch c.Op {
	case "gemm":
		return one(refGemm(M, N, K, f(0), f(1), c.Policy)), true
	case "gemm_relu", "gemm_gelu":
		return one(refGemmAct(c.Op, M, N, K, f(0), f(1), c.Policy)), true
	case "bmm":
		return one(refBmm(d["B"], M, N, K, f(0), f(1), c.Policy)), true
	case "gemv":
		return one(refGemm(M, 1, K, f(0), f(1), c.Policy)), true
	case "add":
		return one(refAdd(f(0), f(1))), true
	case "gelu_add", "sigmoid_pair", "gelu_pair", "swiglu":
		return refPointwise(c.Op, inputs), true
	case "rope":
		return one(refRope(M, N, d["R"], f(0), f(1), f(2))), true
	case "sum":
		return one(refSum(M, N, f(0))), true
	case "max":
		return one(refMax(M, N, f(0))), true
	case "softmax":
		return one(refSoftmax(M, N, f(0))), true
	case "rmsnorm":
		return one(refRMSNorm(M, N, c.Eps(), f(0), f(1))), true
	case "layernorm":
		return one(refLayerNorm(M, N, c.Eps(), widen(f(0)), f(1), f(2), 0, 0)), true
	case "residual_layernorm":
		return refResidualLayerNorm(M, N, c.Eps(), c.Dtype, f(0), f(1), f(2), f(3)), true
	case "cross_entropy":
		return one(refCrossEntropy(M, N, f(0), inputs[1].I)), true
	case "scan_ordered":
		return one(refScanOrdered(M, N, f(0))), true
	case "scan":
		return one(refScan(M, N, f(0))), true
	case "argmax":
		return refArgmax(M, N, f(0)), true
	case "topk":
		return refRank(M, N, K, f(0), true), true
	case "sort":
		return refRank(M, N, N, f(0), false), true
	case "embedding":
		return one(refEmbedding(d["D"], f(0), inputs[1].I)), true
	case "attention":
		return one(refAttention(d, c.Dtype, f(0), f(1), f(2))), true
	}
	return nil, false
}

// grainExp returns the largest e such that every element of x is an
// integer multiple of 2^e (0 when x is all zeros).
func grainExp(x []float32) int {
	e, any := 0, false
	for _, v := range x {
		b := math.Float32bits(v) &^ (1 << 31)
		if b == 0 {
			continue
		}
		exp, man := int(b>>23), b&0x7FFFFF
		var g int
		if exp == 0 {
			g = -149 + bits.TrailingZeros32(man)
		} else {
			g = exp - 150 + bits.TrailingZeros32(man|1<<23)
		}
		if !any || g < e {
			e, any = g, true
		}
	}
	return e
}

// exactLimit returns L such that a sum of binary32 terms that are all
// multiples of 2^e is computed exactly, in any order, whenever the sum of
// the terms' magnitudes is at most L: then every partial sum is a multiple
// of 2^e of magnitude at most 2^24 * 2^e, which binary32 represents. It
// returns -1 when the grain is subnormal (flush-to-zero could lose it) or
// the limit would overflow.
func exactLimit(e int) float64 {
	if e < -126 || e+24 > 127 {
		return -1
	}
	return math.Ldexp(1, 24+e)
}

func widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// refGemm: C = A·B. See docs/oracle.md, "gemm"; policy tf32 widens the
// bound to the TF32 envelope (docs/oracle.md, "Policies"). Both products
// are one [dgemm] each: OpenBLAS where cgo is on, gonum where it is off;
// their last bits differ, which [SamePacket] allows for.
func refGemm(M, N, K int, a, b []float32, policy string) (want, bnd []float64) {
	a64, b64 := widen(a), widen(b)
	want = make([]float64, M*N)
	dgemm(M, N, K, a64, b64, want)
	for i := range a64 {
		a64[i] = math.Abs(a64[i])
	}
	for i := range b64 {
		b64[i] = math.Abs(b64[i])
	}
	bnd = make([]float64, M*N)
	dgemm(M, N, K, a64, b64, bnd)
	if policy == PolicyTF32 {
		for i, s := range bnd {
			bnd[i] = tf32DotBound(s, K)
		}
		return want, bnd
	}
	limit := exactLimit(grainExp(a) + grainExp(b))
	for i, s := range bnd {
		bnd[i] = dotBound(s, want[i], K, true, limit)
	}
	return want, bnd
}

// tf32Unit bounds the relative error of converting a binary32 input to
// TF32 (11 significant bits) by rounding or by truncation: 2^-10.
// tf32Op bounds one product or addition rounded to binary32 to nearest or
// toward zero (tensor-core accumulation truncates): 2u.
const (
	tf32Unit = 0x1p-10
	tf32Op   = 2 * unit
)

// tf32DotBound bounds a K-term dot product under the tf32 policy, s the
// sum of the exact terms' magnitudes: each input converted (1 ± 2^-10),
// then K products and additions in any order, each off by at most 2u:
// ((1+t)^2 - 1)·s + γ'_K·(1+t)^2·s, γ'_K = K·2u/(1 − K·2u).
func tf32DotBound(s float64, K int) float64 {
	conv := (1 + tf32Unit) * (1 + tf32Unit)
	kk := float64(K) * tf32Op
	if kk >= 1 {
		return math.Inf(1)
	}
	return ((conv-1)*s + kk/(1-kk)*conv*s + float64(2*K-1)*tiny) * slack
}

// dotBound bounds the binary32 error of a sum of n terms (docs/oracle.md,
// lemmas 1-3): s is the sum of the exact terms' magnitudes, y the exact
// sum, products tells whether each term is a product rounded on its own
// (gemm) rather than an exact input (sum), and limit is exactLimit of the
// terms' grain.
func dotBound(s, y float64, n int, products bool, limit float64) float64 {
	if s <= limit {
		return 0
	}
	var rounded float64 // product roundings per term
	if products {
		rounded = 1
	}
	g := gamma(n - 1 + int(rounded))
	// Each partial sum is a subset sum, at most max(P, N) = (s+|y|)/2 in
	// magnitude before its own error, which g*s bounds.
	partial := (s + math.Abs(y)) / 2
	refined := rounded*unit*(1+unit)*s + unit*float64(n-1)*(partial+g*s)
	floor := (float64(n-1) + rounded*float64(n)) * tiny
	return (math.Min(g*s, refined) + floor) * slack
}

// refAdd: C = A+B, one rounding per element.
func refAdd(a, b []float32) (want, bnd []float64) {
	want = make([]float64, len(a))
	bnd = make([]float64, len(a))
	parallel(len(a), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s := float64(a[i]) + float64(b[i])
			want[i] = s
			switch as := math.Abs(s); {
			case s == 0:
				bnd[i] = 0
			case as < tiny:
				bnd[i] = tiny * slack
			case float64(float32(s)) == s:
				bnd[i] = 0
			default:
				bnd[i] = unit * as * slack
			}
		}
	})
	return want, bnd
}

// refSum: Y[i] = sum_j X[i,j].
func refSum(M, N int, x []float32) (want, bnd []float64) {
	want = make([]float64, M)
	bnd = make([]float64, M)
	limit := exactLimit(grainExp(x))
	for i := 0; i < M; i++ {
		var y, s float64
		for _, v := range x[i*N : (i+1)*N] {
			y += float64(v)
			s += math.Abs(float64(v))
		}
		want[i] = y
		bnd[i] = dotBound(s, y, N, false, limit)
	}
	return want, bnd
}

// refSoftmax: Y[i,j] = exp(X[i,j] - max_j X[i,:]) / sum_j exp(...).
func refSoftmax(M, N int, x []float32) (want, bnd []float64) {
	want = make([]float64, M*N)
	bnd = make([]float64, M*N)
	var sorted []float32
	for i := 0; i < M; i++ {
		row := x[i*N : (i+1)*N]
		y, theta := want[i*N:(i+1)*N], bnd[i*N:(i+1)*N]
		m := rowMax(row)
		var s float64
		for j, v := range row {
			d := float64(v) - m
			y[j] = math.Exp(d)
			s += y[j]
			theta[j] = expTheta(d, float64(v))
		}
		var phi float64
		phi, sorted = expSumError(row, y, m, s, sorted)
		for j := range y {
			y[j] /= s
			rho := (1+theta[j])*(1+divRel)/(1-phi) - 1
			if !(phi < 1) {
				rho = math.Inf(1)
			}
			theta[j] = finite((rho*y[j] + 3*tiny) * slack)
		}
	}
	return want, bnd
}

// upperBound is the index of the first element of ascending a above v.
func upperBound(a []float32, v float32) int {
	lo, hi := 0, len(a)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if a[mid] > v {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func rowMax(row []float32) float64 {
	m := float64(row[0])
	for _, v := range row {
		m = math.Max(m, float64(v))
	}
	return m
}

// expSumError is Φ, the bound on the relative error of a computed
// s = Σ_j exp(x_j − m) over one row (m the row max, s the exact sum), in
// any order and also as an online sum (a running max, the partial sum
// rescaled by exp(m_old − m_new) when the max rises): docs/oracle.md,
// softmax step 2; e[j] = exp(x_j − m). Term j is rescaled at most
// c_j = #{k : x_k > x_j} times,
// since every rescale raises the max its partial sum is scaled to, to
// another element's value. sorted is scratch, returned for reuse.
func expSumError(row []float32, e []float64, m, s float64, sorted []float32) (float64, []float32) {
	N := len(row)
	sorted = append(sorted[:0], row...)
	slices.Sort(sorted)
	gs := gamma(N - 1)
	phi := 2 * float64(N) * tiny
	for j, v := range row {
		d := float64(v) - m
		c := N - upperBound(sorted, v)
		g, rho := gs, 0.0
		if c > 0 {
			// c rescales: each an exp (the allowance, its argument's
			// rounding; the arguments add up to -d) and one product.
			g = gamma(N - 1 + c)
			rho = math.Expm1((expBase*float64(c) + (expSlope+1)*(-d)) * unit)
		}
		phi += e[j] / s * ((1+expTheta(d, float64(v)))*(1+rho)*(1+g) - 1)
	}
	return phi, sorted
}

// finite maps a bound that left the domain of its derivation (NaN,
// negative) to +Inf, "no guarantee". The patterns of this package never
// reach it; see docs/oracle.md, "Limits".
func finite(b float64) float64 {
	if !(b >= 0) {
		return math.Inf(1)
	}
	return b
}

// epsError bounds |fl32(eps) - eps|: half an ulp while eps is a normal
// binary32 number, all of it when fl32(eps) may be subnormal and flushed.
func epsError(eps float64) float64 {
	if eps >= tiny {
		return unit * eps
	}
	return eps
}

// rsqrtError bounds |r̂/r - 1| when r = 1/sqrt(v) is computed from a v̂
// with |v̂/v - 1| <= eta.
func rsqrtError(eta float64) float64 {
	if eta >= 1 {
		return math.Inf(1)
	}
	return (1+rsqrtRel)/math.Sqrt(1-eta) - 1
}

// refRMSNorm: Y = X * rsqrt(mean(X^2) + eps) * W, per row.
func refRMSNorm(M, N int, eps float64, x, w []float32) (want, bnd []float64) {
	want = make([]float64, M*N)
	bnd = make([]float64, M*N)
	gq, eEps := gamma(N+3), epsError(eps)
	for i := 0; i < M; i++ {
		row := x[i*N : (i+1)*N]
		var q float64
		for _, v := range row {
			q += float64(v) * float64(v)
		}
		ms := q / float64(N)
		v := ms + eps
		r := 1 / math.Sqrt(v)
		eV := gq*ms + eEps + unit*(v+gq*ms+eEps) + 4*tiny
		rhoY := (1+rsqrtError(eV/v))*(1+unit)*(1+unit) - 1
		for j, xv := range row {
			y := float64(xv) * r * float64(w[j])
			want[i*N+j] = y
			floor := (2 + math.Abs(float64(xv)) + math.Abs(float64(w[j]))) * tiny
			bnd[i*N+j] = finite((rhoY*math.Abs(y) + floor) * slack)
		}
	}
	return want, bnd
}

// refLayerNorm: Y = (X - mean) * rsqrt(var + eps) * W + B, per row, with
// the biased variance. x is exact; an implementation may see it perturbed
// by at most delta*|x_j| + tau per element (residual_layernorm reading a
// rounded H), which the bound covers (docs/oracle.md, "residual_layernorm").
func refLayerNorm(M, N int, eps float64, x []float64, w, b []float32, delta, tau float64) (want, bnd []float64) {
	want = make([]float64, M*N)
	bnd = make([]float64, M*N)
	n := float64(N)
	gMean, gTwo, gOne := gamma(N+1), gamma(N+4), gamma(N+3)
	eEps := epsError(eps)
	for i := 0; i < M; i++ {
		row := x[i*N : (i+1)*N]
		var sx, sa, s2 float64
		for _, v := range row {
			sx += v
			sa += math.Abs(v)
			s2 += v * v
		}
		mu, A := sx/n, sa/n
		var sc float64
		for _, v := range row {
			d := v - mu
			sc += d * d
		}
		vr := sc / n
		v := vr + eps
		r := 1 / math.Sqrt(v)

		// The perturbed input h' = h + D, |D_j| <= delta|h_j| + tau:
		// |mean(D)| <= dMu, rms(D - mean(D)) <= rms(D) <= eRMS.
		dMu := delta*A + tau
		eRMS := delta*math.Sqrt(s2/n) + tau
		dVar := 2*math.Sqrt(vr)*eRMS + eRMS*eRMS
		vLo := v - dVar
		// Upper bounds of the perturbed row's statistics.
		A1 := A*(1+delta) + tau
		amu := math.Abs(mu) + dMu
		vr1 := vr + dVar
		q1 := math.Sqrt(s2/n)*(1+delta) + tau
		q1 *= q1
		r1 := 1 / math.Sqrt(vLo)
		rPert := 1/math.Sqrt(1-dVar/v) - 1
		if !(vLo > 0) {
			r1, rPert = math.Inf(1), math.Inf(1)
		}

		eMu := gMean*A1 + 2*tiny
		twoPass := gTwo*vr1 + (1+gTwo)*eMu*eMu + 5*tiny
		onePass := (1+unit)*(gOne*q1+eMu*(2*amu+eMu)+unit*(amu+eMu)*(amu+eMu)) + unit*vr1 + 5*tiny
		eVar := math.Max(twoPass, onePass)
		eV := eVar + eEps + unit*(vr1+eps+eVar+eEps) + tiny
		rhoR := rsqrtError(eV / vLo)
		rHi := r1 * (1 + rhoR)
		for j, xv := range row {
			c := xv - mu
			aw := math.Abs(float64(w[j]))
			y := c*r*float64(w[j]) + float64(b[j])
			dc := delta*math.Abs(xv) + tau + dMu
			pert := aw * (dc*r1 + math.Abs(c)*r*rPert)
			if delta == 0 && tau == 0 {
				pert = 0
			}
			cAbs := math.Abs(c) + dc
			xAbs := math.Abs(xv)*(1+delta) + tau
			pre := cAbs*r1*rhoR*aw + eMu*rHi*aw +
				3*unit*(1+unit)*(1+unit)*(xAbs+amu+eMu)*rHi*aw +
				unit*math.Abs(float64(b[j]))
			want[i*N+j] = y
			floor := (6 + xAbs + amu + aw) * tiny
			bnd[i*N+j] = finite(((1+unit)*pre + unit*(math.Abs(y)+pert) + pert + floor) * slack)
		}
	}
	return want, bnd
}
