package oracle

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// This file holds binary32 implementations of every op in several
// evaluation orders, the stand-ins for real kernels in the property tests.
// Every binary32 product is written float32(x*y) so that the compiler
// cannot fuse it into an FMA; fma32 is the explicit fused form.

// fma32 returns x*y+z rounded once to binary32 (round to nearest even).
// The product is exact in float64; the sum is split into s+e exactly
// (TwoSum), and e only matters when s is a binary32 midpoint.
func fma32(x, y, z float32) float32 {
	p := float64(x) * float64(y)
	s := p + float64(z)
	bb := s - p
	e := (p - (s - bb)) + (float64(z) - bb)
	r := float32(s)
	if e == 0 || float64(r) == s {
		return r
	}
	other := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-float64(r))))
	if mid := (float64(r) + float64(other)) / 2; s == mid {
		lo, hi := r, other
		if hi < lo {
			lo, hi = hi, lo
		}
		if e > 0 {
			return hi
		}
		return lo
	}
	return r
}

// dotter computes sum_k x[k]*y[k] in binary32 in one evaluation order.
type dotter struct {
	name string
	fn   func(x, y []float32) float32
}

func dotSeq(x, y []float32) float32 {
	var acc float32
	for k := range x {
		acc = acc + float32(x[k]*y[k])
	}
	return acc
}

func dotSeqFMA(x, y []float32) float32 {
	var acc float32
	for k := range x {
		acc = fma32(x[k], y[k], acc)
	}
	return acc
}

func dotRev(x, y []float32) float32 {
	var acc float32
	for k := len(x) - 1; k >= 0; k-- {
		acc = acc + float32(x[k]*y[k])
	}
	return acc
}

func dotRevFMA(x, y []float32) float32 {
	var acc float32
	for k := len(x) - 1; k >= 0; k-- {
		acc = fma32(x[k], y[k], acc)
	}
	return acc
}

func dotPairwise(x, y []float32) float32 {
	if len(x) <= 8 {
		return dotSeq(x, y)
	}
	h := len(x) / 2
	return dotPairwise(x[:h], y[:h]) + dotPairwise(x[h:], y[h:])
}

// dotLanes is a SIMD-style reduction: L independent accumulators (lane k
// takes elements k, k+L, ...), combined pairwise at the end.
func dotLanes(L int, fma bool) func(x, y []float32) float32 {
	return func(x, y []float32) float32 {
		acc := make([]float32, L)
		for k := range x {
			if fma {
				acc[k%L] = fma32(x[k], y[k], acc[k%L])
			} else {
				acc[k%L] = acc[k%L] + float32(x[k]*y[k])
			}
		}
		for w := L / 2; w >= 1; w /= 2 {
			for l := 0; l < w; l++ {
				acc[l] = acc[l] + acc[l+w]
			}
		}
		return acc[0]
	}
}

// dotBlocked sums blocks of B terms sequentially and then adds the block
// sums into a running total, as a K-blocked GEMM does.
func dotBlocked(B int, fma bool) func(x, y []float32) float32 {
	return func(x, y []float32) float32 {
		var total float32
		for k0 := 0; k0 < len(x); k0 += B {
			k1 := min(k0+B, len(x))
			var blk float32
			if fma {
				blk = dotSeqFMA(x[k0:k1], y[k0:k1])
			} else {
				blk = dotSeq(x[k0:k1], y[k0:k1])
			}
			total = total + blk
		}
		return total
	}
}

func dotF64(x, y []float32) float32 {
	var acc float64
	for k := range x {
		acc += float64(x[k]) * float64(y[k])
	}
	return float32(acc)
}

func dotKahan(x, y []float32) float32 {
	var s, c float32
	for k := range x {
		t := float32(x[k]*y[k]) - c
		u := s + t
		c = (u - s) - t
		s = u
	}
	return s
}

// dotSorted is an adversarial order: rounded products with positive ones
// first, largest first, then negative ones, smallest magnitude first, so
// that the partial sums, and with them the rounding errors, are as large
// as a sequential order can make them.
func dotSorted(x, y []float32) float32 {
	t := make([]float32, len(x))
	for k := range x {
		t[k] = float32(x[k] * y[k])
	}
	// Descending order is exactly that: positives largest first, then
	// negatives smallest magnitude first.
	sort.Slice(t, func(i, j int) bool { return t[i] > t[j] })
	var acc float32
	for _, v := range t {
		acc = acc + v
	}
	return acc
}

var dotters = []dotter{
	{"seq", dotSeq},
	{"seq-fma", dotSeqFMA},
	{"reversed", dotRev},
	{"reversed-fma", dotRevFMA},
	{"pairwise", dotPairwise},
	{"lanes8", dotLanes(8, false)},
	{"lanes16-fma", dotLanes(16, true)},
	{"blocked16", dotBlocked(16, false)},
	{"blocked64-fma", dotBlocked(64, true)},
	{"f64-acc", dotF64},
	{"kahan", dotKahan},
	{"sorted", dotSorted},
}

func ones(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	return x
}

// impl is one binary32 implementation of an op: run for the ops with one
// float output, runT for the others. Outputs in half storage are computed
// in binary32 and rounded once to the storage dtype.
type impl struct {
	name string
	run  func(c Case, in [][]float32) []float32
	runT func(c Case, in []Tensor) []Tensor
}

func (im impl) outputs(c Case, in []Tensor) []Tensor {
	var out []Tensor
	if im.runT != nil {
		out = im.runT(c, in)
	} else {
		out = []Tensor{F32(im.run(c, f32s(in)))}
	}
	sig, _ := Signature(c)
	k := 0
	for _, p := range sig {
		if p.Role != "output" {
			continue
		}
		if p.Dtype == "f16" || p.Dtype == "bf16" {
			for i, v := range out[k].F {
				out[k].F[i] = toStorage(p.Dtype, v)
			}
		}
		out[k].Dtype = p.Dtype
		k++
	}
	return out
}

func gemmImpl(d dotter) impl {
	return impl{name: "gemm/" + d.name, run: func(c Case, in [][]float32) []float32 {
		M, N, K := c.Dims["M"], c.Dims["N"], c.Dims["K"]
		a, b := in[0], in[1]
		bt := make([]float32, N*K)
		for k := 0; k < K; k++ {
			for j := 0; j < N; j++ {
				bt[j*K+k] = b[k*N+j]
			}
		}
		out := make([]float32, M*N)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				out[i*N+j] = d.fn(a[i*K:(i+1)*K], bt[j*K:(j+1)*K])
			}
		}
		return out
	}}
}

func sumImpl(d dotter) impl {
	return impl{name: "sum/" + d.name, run: func(c Case, in [][]float32) []float32 {
		M, N := c.Dims["M"], c.Dims["N"]
		one := ones(N)
		out := make([]float32, M)
		for i := range out {
			out[i] = d.fn(in[0][i*N:(i+1)*N], one)
		}
		return out
	}}
}

func addImpl(c Case, in [][]float32) []float32 {
	out := make([]float32, len(in[0]))
	for i := range out {
		out[i] = in[0][i] + in[1][i]
	}
	return out
}

// Exponentials. expLibm is (nearly) correctly rounded; expHalide is
// Halide's vectorizable polynomial (halide_exp in IROperator.cpp: floor
// range reduction with a two-part ln 2, degree-7 polynomial evaluated as
// even and odd halves); expBase2 reduces the argument as fl(d*log2(e)) like
// CUDA's __expf and Triton's exp, then takes an exact 2^t.
func expLibm(d float32) float32 { return float32(math.Exp(float64(d))) }

func expHalide(x float32) float32 {
	const ln2a, ln2b = float32(0.6931457519), float32(1.4286067653e-6)
	inv := float32(1) / float32(math.Ln2)
	kr := float32(math.Floor(float64(float32(x * inv))))
	r := x - float32(kr*ln2a)
	r = r - float32(kr*ln2b)
	c := [8]float32{0.00031965933071842413, 0.00119156835564003744, 0.00848988645943932717,
		0.04160188091348320655, 0.16667983794100929562, 0.49999899033463041098, 1, 1}
	x2 := float32(r * r)
	even, odd := c[0], c[1]
	for i := 2; i < 8; i++ {
		if i%2 == 0 {
			even = float32(even*x2) + c[i]
		} else {
			odd = float32(odd*x2) + c[i]
		}
	}
	p := float32(even*r) + odd
	biased := int32(kr) + 127
	if biased <= 0 {
		return 0
	}
	return float32(p * math.Float32frombits(uint32(biased)<<23))
}

// expEdge is an exponential at the edge of the allowance: 3.5 ulp above
// e^d (the allowance is 4 ulp), exact at d = 0 as any faithful exp is.
func expEdge(d float32) float32 {
	if d == 0 {
		return 1
	}
	return float32(math.Exp(float64(d)) * (1 + 7*unit))
}

func expBase2(d float32) float32 {
	t := float32(d * float32(math.Log2E))
	return float32(math.Exp2(float64(t)))
}

type softmaxVariant struct {
	name   string
	exp    func(float32) float32
	sum    dotter
	recip  bool // y = e * fl(1/s) instead of e / s
	shift  bool // subtract the row max
	online int  // 0: three-pass; 1: sequential online; L: L-lane online
}

func softmaxImpl(v softmaxVariant) impl {
	return impl{name: "softmax/" + v.name, run: func(c Case, in [][]float32) []float32 {
		M, N := c.Dims["M"], c.Dims["N"]
		out := make([]float32, M*N)
		one := ones(N)
		e := make([]float32, N)
		for i := 0; i < M; i++ {
			x, y := in[0][i*N:(i+1)*N], out[i*N:(i+1)*N]
			var m, s float32
			switch {
			case v.online > 0 && strings.HasSuffix(v.name, "/sorted"):
				// Ascending order: every element is a new maximum, the
				// most rescales any order causes.
				m, s = onlineMaxSum(slices.Sorted(slices.Values(x)), v.exp, v.online)
			case v.online > 0:
				m, s = onlineMaxSum(x, v.exp, v.online)
			default:
				if v.shift {
					m = x[0]
					for _, xv := range x {
						m = max(m, xv)
					}
				}
				for j, xv := range x {
					e[j] = v.exp(xv - m)
				}
				s = v.sum.fn(e, one)
			}
			r := float32(1) / s
			for j, xv := range x {
				ej := v.exp(xv - m)
				if v.recip {
					y[j] = ej * r
				} else {
					y[j] = ej / s
				}
			}
		}
		return out
	}}
}

// onlineMaxSum is the single-pass "online softmax" normaliser with L
// lanes, each keeping a running max and rescaling its sum when the max
// grows; the lanes are merged sequentially.
func onlineMaxSum(x []float32, exp func(float32) float32, L int) (float32, float32) {
	L = min(L, len(x))
	m := make([]float32, L)
	s := make([]float32, L)
	copy(m, x[:L])
	for k, xv := range x {
		l := k % L
		if xv > m[l] {
			s[l] = float32(s[l] * exp(m[l]-xv))
			m[l] = xv
		}
		s[l] = s[l] + exp(xv-m[l])
	}
	M, S := m[0], s[0]
	for l := 1; l < L; l++ {
		if m[l] > M {
			S = float32(S*exp(M-m[l])) + s[l]
			M = m[l]
		} else {
			S = S + float32(s[l]*exp(m[l]-M))
		}
	}
	return M, S
}

// Reciprocal square roots. rsqrtDiv is 1/fl(sqrt(v)); rsqrtRound is the
// correctly rounded value; rsqrtNewton models a 12-bit hardware estimate
// (rsqrtps: relative error up to 1.5*2^-12, here pushed to that edge)
// refined by one Newton step in binary32, as compilers emit under -mrecip.
func rsqrtDiv(v float32) float32 { return 1 / float32(math.Sqrt(float64(v))) }

func rsqrtRound(v float32) float32 { return float32(1 / math.Sqrt(float64(v))) }

func rsqrtNewton(v float32) float32 {
	exact := 1 / math.Sqrt(float64(v))
	sign := 1.0
	if math.Float32bits(v)&1 == 1 {
		sign = -1
	}
	r0 := float32(exact * (1 + sign*1.5*0x1p-12))
	h := float32(0.5) * v
	t := float32(h * r0)
	t = float32(t * r0)
	t = float32(1.5) - t
	return float32(r0 * t)
}

type normVariant struct {
	name  string
	sum   dotter
	mean  int // 0: divide by N; 1: multiply by fl(1/N); 2: scale each term by fl(1/N)
	rsqrt func(float32) float32
	form  int // layout of the final products; see the impls
	stats int // layernorm only: 0 two-pass, 1 one-pass, 2 Welford, 3 Welford lanes + Chan
}

// meanOf returns the binary32 mean of the terms f(x[k]) by the variant's
// summation and scaling.
func (v normVariant) meanOf(x []float32, sq bool) float32 {
	n := len(x)
	inv := float32(1) / float32(n)
	t := make([]float32, n)
	for k, xv := range x {
		if sq {
			t[k] = float32(xv * xv)
		} else {
			t[k] = xv
		}
		if v.mean == 2 {
			t[k] = float32(t[k] * inv)
		}
	}
	s := v.sum.fn(t, ones(n))
	switch v.mean {
	case 0:
		return s / float32(n)
	case 1:
		return float32(s * inv)
	}
	return s
}

func rmsnormImpl(v normVariant) impl {
	return impl{name: "rmsnorm/" + v.name, run: func(c Case, in [][]float32) []float32 {
		M, N := c.Dims["M"], c.Dims["N"]
		eps := float32(c.Eps())
		x, w := in[0], in[1]
		out := make([]float32, M*N)
		for i := 0; i < M; i++ {
			row := x[i*N : (i+1)*N]
			r := v.rsqrt(v.meanOf(row, true) + eps)
			for j, xv := range row {
				if v.form == 0 {
					out[i*N+j] = float32(float32(xv*r) * w[j])
				} else {
					out[i*N+j] = float32(xv * float32(r*w[j]))
				}
			}
		}
		return out
	}}
}

// moments returns the binary32 mean and biased variance of x.
func (v normVariant) moments(x []float32) (float32, float32) {
	n := float32(len(x))
	switch v.stats {
	case 0:
		mu := v.meanOf(x, false)
		c := make([]float32, len(x))
		for k, xv := range x {
			c[k] = xv - mu
		}
		return mu, v.meanOf(c, true)
	case 1:
		mu := v.meanOf(x, false)
		return mu, max(0, v.meanOf(x, true)-float32(mu*mu))
	case 2:
		var mean, m2 float32
		for k, xv := range x {
			d := xv - mean
			mean = mean + d/float32(k+1)
			m2 = m2 + float32(d*(xv-mean))
		}
		return mean, m2 / n
	}
	const L = 8
	var cnt [L]float32
	var mean, m2 [L]float32
	for k, xv := range x {
		l := k % L
		cnt[l]++
		d := xv - mean[l]
		mean[l] = mean[l] + d/cnt[l]
		m2[l] = m2[l] + float32(d*(xv-mean[l]))
	}
	na, ma, qa := cnt[0], mean[0], m2[0]
	for l := 1; l < L; l++ {
		nb := cnt[l]
		if nb == 0 {
			continue
		}
		d := mean[l] - ma
		nn := na + nb
		ma = ma + float32(d*nb)/nn
		qa = qa + m2[l] + float32(float32(d*d)*float32(na*nb))/nn
		na = nn
	}
	return ma, qa / n
}

// layernormImpl forms: 0 centred ((x-mu)*r)*w + b; 1 centred with a final
// FMA; 2 PyTorch CPU's (x*r + (-r*mu))*w + b; 3 fully folded per column,
// a = r*w, y = x*a + (b - mu*a).
func layernormImpl(v normVariant) impl {
	return impl{name: "layernorm/" + v.name, run: func(c Case, in [][]float32) []float32 {
		M, N := c.Dims["M"], c.Dims["N"]
		eps := float32(c.Eps())
		x, w, b := in[0], in[1], in[2]
		out := make([]float32, M*N)
		for i := 0; i < M; i++ {
			row := x[i*N : (i+1)*N]
			mu, vr := v.moments(row)
			r := v.rsqrt(vr + eps)
			for j, xv := range row {
				var y float32
				switch v.form {
				case 0:
					y = float32(float32((xv-mu)*r)*w[j]) + b[j]
				case 1:
					y = fma32(float32((xv-mu)*r), w[j], b[j])
				case 2:
					bias := -float32(r * mu)
					y = float32((float32(xv*r)+bias)*w[j]) + b[j]
				default:
					a := float32(r * w[j])
					y = float32(xv*a) + (b[j] - float32(mu*a))
				}
				out[i*N+j] = y
			}
		}
		return out
	}}
}

var (
	seqD      = dotters[0]
	pairD     = dotters[4]
	lanesD    = dotters[6]
	blockedD  = dotters[7]
	f64D      = dotters[9]
	reversedD = dotters[2]
)

func impls(op string) []impl {
	var out []impl
	switch op {
	case "gemm":
		for _, d := range dotters {
			out = append(out, gemmImpl(d))
		}
	case "sum":
		for _, d := range dotters {
			out = append(out, sumImpl(d))
		}
	case "add":
		out = append(out, impl{name: "add/plain", run: addImpl})
	case "softmax":
		for _, v := range []softmaxVariant{
			{"libm/seq/div", expLibm, seqD, false, true, 0},
			{"libm/pairwise/recip", expLibm, pairD, true, true, 0},
			{"halide/lanes16-fma/div", expHalide, lanesD, false, true, 0},
			{"halide/blocked16/recip", expHalide, blockedD, true, true, 0},
			{"base2/seq/div", expBase2, seqD, false, true, 0},
			{"base2/reversed/recip", expBase2, reversedD, true, true, 0},
			{"libm/f64/noshift", expLibm, f64D, false, false, 0},
			{"halide/online-seq", expHalide, seqD, false, true, 1},
			{"libm/online-lanes8", expLibm, seqD, true, true, 8},
			{"libm/online-seq/sorted", expLibm, seqD, false, true, 1},
			{"edge/online-seq/sorted", expEdge, seqD, false, true, 1},
		} {
			out = append(out, softmaxImpl(v))
		}
	case "rmsnorm":
		for _, v := range []normVariant{
			{"seq/div/rsqrt-div", seqD, 0, rsqrtDiv, 0, 0},
			{"pairwise/recip/rsqrt-round", pairD, 1, rsqrtRound, 1, 0},
			{"lanes16-fma/scaled/newton", lanesD, 2, rsqrtNewton, 0, 0},
			{"blocked16/div/newton", blockedD, 0, rsqrtNewton, 1, 0},
			{"reversed/recip/rsqrt-div", reversedD, 1, rsqrtDiv, 1, 0},
			{"f64/div/rsqrt-round", f64D, 0, rsqrtRound, 0, 0},
		} {
			out = append(out, rmsnormImpl(v))
		}
	case "layernorm":
		for _, v := range []normVariant{
			{"two-pass/seq/centred", seqD, 0, rsqrtDiv, 0, 0},
			{"two-pass/pairwise/fma", pairD, 1, rsqrtRound, 1, 0},
			{"two-pass/lanes16-fma/pytorch", lanesD, 0, rsqrtNewton, 2, 0},
			{"one-pass/seq/folded", seqD, 0, rsqrtDiv, 3, 1},
			{"one-pass/blocked16/scaled/centred", blockedD, 2, rsqrtNewton, 0, 1},
			{"welford/pytorch", seqD, 0, rsqrtDiv, 2, 2},
			{"welford-lanes8/folded", seqD, 0, rsqrtNewton, 3, 3},
			{"two-pass/f64/centred", f64D, 0, rsqrtRound, 0, 0},
		} {
			out = append(out, layernormImpl(v))
		}
	default:
		out = moreImpls(op)
	}
	return out
}
