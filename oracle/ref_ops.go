package oracle

import (
	"math"
	"sort"
)

// Allowances of the error model beyond exp, division and rsqrt
// (docs/oracle.md, "Error model").
const (
	// tanhRel and tanhAbs bound a binary32 tanh at a binary32 argument t:
	// |tanh32(t) - tanh(t)| <= tanhRel*|tanh(t)| + tanhAbs. The absolute
	// part admits 1 - 2/(exp(2t)+1) with the exp and division allowances,
	// whose error near t = 0 is absolute, not relative.
	tanhRel = 8 * unit
	tanhAbs = 16 * unit

	// logRel and logAbs bound a binary32 log at v >= 1:
	// |log32(v) - log(v)| <= logRel*|log(v)| + logAbs.
	logRel = 8 * unit
	logAbs = unit
)

// evBounds evaluates f per element and returns its values and bounds
// (times slack: the float64 evaluation of the exact values).
func evBounds(n int, f func(i int) ev) (want, bnd []float64) {
	want, bnd = make([]float64, n), make([]float64, n)
	parallel(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := f(i)
			want[i], bnd[i] = x.v, finite(x.e*slack)
		}
	})
	return want, bnd
}

// refGemmAct: C = act(0.125*(A·B) + 0.25), act relu or tanh-GELU.
func refGemmAct(op string, M, N, K int, a, b []float32, policy string) (want, bnd []float64) {
	w, bd := refGemm(M, N, K, a, b, policy)
	return evBounds(M*N, func(i int) ev {
		z := evAdd(evScale(ev{w[i], bd[i]}, 0.125), cnst(0.25))
		if op == "gemm_gelu" {
			y, _ := gelu(z)
			return y
		}
		return relu(z)
	})
}

// relu is max(0, z): 1-Lipschitz, and exactly 0 when z is surely negative.
func relu(z ev) ev {
	switch {
	case z.v+z.e < 0:
		return ev{0, 0}
	case z.v-z.e > 0:
		return z
	}
	return ev{math.Max(0, z.v), z.e}
}

// refBmm: one gemm per batch.
func refBmm(B, M, N, K int, a, b []float32, policy string) (want, bnd []float64) {
	for i := 0; i < B; i++ {
		w, bd := refGemm(M, N, K, a[i*M*K:(i+1)*M*K], b[i*K*N:(i+1)*K*N], policy)
		want, bnd = append(want, w...), append(bnd, bd...)
	}
	return want, bnd
}

// refPointwise: gelu_add, sigmoid_pair, gelu_pair and swiglu.
func refPointwise(op string, in []Tensor) []Expected {
	x := in[0].F
	n := len(x)
	ys := make([]ev, n)
	var ds []ev
	if op == "gelu_pair" || op == "sigmoid_pair" {
		ds = make([]ev, n)
	}
	parallel(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi := exactIn(x[i])
			switch op {
			case "gelu_add":
				ys[i], _ = gelu(evAdd(xi, exactIn(in[1].F[i])))
			case "gelu_pair":
				ys[i], ds[i] = gelu(xi)
			case "sigmoid_pair":
				s := sigmoid(xi)
				ys[i], ds[i] = s, sigmoidDeriv(xi, s)
			case "swiglu":
				u := exactIn(in[1].F[i])
				s := sigmoid(xi)
				forms := []ev{evMul(evMul(xi, s), u), evMul(xi, evMul(s, u))}
				if xi.v > -80 {
					// (g / (1 + exp(-g))) * u while exp(-g) is finite
					forms = append(forms, evMul(evDiv(xi, evAdd(cnst(1), evExp(ev{-xi.v, 0}))), u))
				}
				ys[i] = worst(forms...)
			}
		}
	})
	pack := func(e []ev) Expected {
		w, b := evBounds(len(e), func(i int) ev { return e[i] })
		return Expected{Want: w, Bound: b}
	}
	out := []Expected{pack(ys)}
	if ds != nil {
		out = append(out, pack(ds))
	}
	return out
}

// refRope: rotation of the first R columns in pairs, the tail copied.
func refRope(M, N, R int, x, cos, sin []float32) (want, bnd []float64) {
	h := R / 2
	return evBounds(M*N, func(i int) ev {
		m, j := i/N, i%N
		if j >= R {
			return exactIn(x[i])
		}
		p := m*h + j/2
		c, s := exactIn(cos[p]), exactIn(sin[p])
		x0, x1 := exactIn(x[m*N+(j&^1)]), exactIn(x[m*N+(j|1)])
		if j%2 == 0 {
			return evSub(evMul(x0, c), evMul(x1, s))
		}
		return evAdd(evMul(x0, s), evMul(x1, c))
	})
}

// refMax: row maxima, exact.
func refMax(M, N int, x []float32) (want, bnd []float64) {
	want, bnd = make([]float64, M), make([]float64, M)
	for i := range want {
		m := x[i*N]
		for _, v := range x[i*N : (i+1)*N] {
			m = max(m, v)
		}
		want[i] = float64(m)
	}
	return want, bnd
}

// refResidualLayerNorm: H = X + R (one rounding), Y = layernorm(H) with
// the input perturbation of a rounded H.
func refResidualLayerNorm(M, N int, eps float64, dtype string, x, r, w, b []float32) []Expected {
	h := make([]float64, M*N)
	for i := range h {
		h[i] = float64(x[i]) + float64(r[i])
	}
	s := storageOf(dtype)
	delta, tau := unit, tiny
	if dtype != "f32" {
		delta, tau = unit+s.unit*(1+unit), tiny+s.tiny
	}
	wy, by := refLayerNorm(M, N, eps, h, w, b, delta, tau)
	wh, bh := refAdd(x, r)
	return []Expected{{Want: wy, Bound: by}, {Want: wh, Bound: bh}}
}

// refCrossEntropy: L = logsumexp(X[m]) - X[m, T[m]], max-shifted.
func refCrossEntropy(M, N int, x []float32, t []int64) (want, bnd []float64) {
	want, bnd = make([]float64, M), make([]float64, M)
	var sorted []float32
	e := make([]float64, N)
	for i := 0; i < M; i++ {
		row := x[i*N : (i+1)*N]
		m := rowMax(row)
		var s float64
		for j, v := range row {
			e[j] = math.Exp(float64(v) - m)
			s += e[j]
		}
		var phi float64
		phi, sorted = expSumError(row, e, m, s, sorted)
		ls := math.Log(s)
		e := math.Inf(1)
		if phi < 1 {
			e = -math.Log1p(-phi)
			e += logRel*(ls+e) + logAbs
		}
		l := evAdd(ev{ls, e}, evSub(ev{m, 0}, exactIn(row[t[i]])))
		want[i], bnd[i] = l.v, finite(l.e*slack)
	}
	return want, bnd
}

// expTheta is the relative error bound of one computed exponential of the
// shifted argument d = x - max <= 0 (docs/oracle.md, softmax step 1).
func expTheta(d, x float64) float64 {
	if -unit*d >= 0.5 {
		return math.Inf(1)
	}
	D := math.Max(-d, math.Abs(x))
	a := (expBase + expSlope*D*(1+unit)) * unit
	return (1+a)/(1+unit*d) - 1
}

// refScanOrdered: the sequential left fold in binary32 is the answer.
func refScanOrdered(M, N int, x []float32) (want, bnd []float64) {
	want, bnd = make([]float64, M*N), make([]float64, M*N)
	for i := 0; i < M; i++ {
		var acc float32
		for j, v := range x[i*N : (i+1)*N] {
			if j == 0 {
				acc = v
			} else {
				acc = acc + v
			}
			want[i*N+j] = float64(acc)
		}
	}
	return want, bnd
}

// refScan: every prefix is a sum in some binary tree (docs/oracle.md).
func refScan(M, N int, x []float32) (want, bnd []float64) {
	want, bnd = make([]float64, M*N), make([]float64, M*N)
	limit := exactLimit(grainExp(x))
	for i := 0; i < M; i++ {
		var y, s float64
		for j, v := range x[i*N : (i+1)*N] {
			y += float64(v)
			s += math.Abs(float64(v))
			want[i*N+j] = y
			bnd[i*N+j] = dotBound(s, y, j+1, false, limit)
		}
	}
	return want, bnd
}

// refArgmax: the first index of the row maximum and that element's bits.
func refArgmax(M, N int, x []float32) []Expected {
	v := Expected{Want: make([]float64, M), Bound: make([]float64, M)}
	idx := Expected{WantI: make([]int64, M)}
	for i := 0; i < M; i++ {
		row := x[i*N : (i+1)*N]
		best := 0
		for j, xv := range row {
			if xv > row[best] {
				best = j
			}
		}
		v.Want[i], idx.WantI[i] = float64(row[best]), int64(best)
	}
	return []Expected{v, idx}
}

// refRank: topk (descending, the K largest) or sort (ascending), with
// tied values in original index order (the stable answer; Compare admits
// other tie orders under the standard contract).
func refRank(M, N, K int, x []float32, desc bool) []Expected {
	v := Expected{Want: make([]float64, M*K), Bound: make([]float64, M*K)}
	idx := Expected{WantI: make([]int64, M*K)}
	order := make([]int, N)
	for i := 0; i < M; i++ {
		row := x[i*N : (i+1)*N]
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool {
			if desc {
				return row[order[a]] > row[order[b]]
			}
			return row[order[a]] < row[order[b]]
		})
		for j := 0; j < K; j++ {
			v.Want[i*K+j] = float64(row[order[j]])
			idx.WantI[i*K+j] = int64(order[j])
		}
	}
	return []Expected{v, idx}
}

// refEmbedding: Y[m] = E[I[m]], an exact copy.
func refEmbedding(D int, e []float32, ids []int64) (want, bnd []float64) {
	want, bnd = make([]float64, len(ids)*D), make([]float64, len(ids)*D)
	for m, id := range ids {
		for j := 0; j < D; j++ {
			want[m*D+j] = float64(e[int(id)*D+j])
		}
	}
	return want, bnd
}

// refAttention: causal GQA attention, bottom-right mask, scale 1/sqrt(D).
// docs/oracle.md, "attention", derives the bound.
func refAttention(d map[string]int, dtype string, q, k, v []float32) (want, bnd []float64) {
	B, Hq, Hkv, Q, K, D, Dv := d["B"], d["Hq"], d["Hkv"], d["Q"], d["K"], d["D"], d["Dv"]
	group := Hq / Hkv
	a := newAttnRow(K, D, 1/math.Sqrt(float64(D)), exactLimit(grainExp(q)+grainExp(k)))
	if dtype != "f32" {
		a.half = storageOf(dtype)
	}
	want = make([]float64, B*Hq*Q*Dv)
	bnd = make([]float64, B*Hq*Q*Dv)
	for b := 0; b < B; b++ {
		for h := 0; h < Hq; h++ {
			hk := h / group
			kb := k[(b*Hkv+hk)*K*D:]
			vb := v[(b*Hkv+hk)*K*Dv:]
			for qi := 0; qi < Q; qi++ {
				n := qi + K - Q + 1 // attended keys 0..n-1
				a.scores(q[((b*Hq+h)*Q+qi)*D:][:D], kb, n)
				a.weights(n)
				o := ((b*Hq+h)*Q + qi) * Dv
				a.output(vb, n, Dv, want[o:o+Dv], bnd[o:o+Dv])
			}
		}
	}
	return want, bnd
}

// attnRow is refAttention's scratch for one query row: the scores s and
// their error bounds E, the softmax weights p, their bounds lo/hi and
// relative errors r, and each term's rescale count cnt.
type attnRow struct {
	D           int
	sc, limit   float64
	sMax, eMax  float64
	s, E, p, r  []float64
	lo, hi, ups []float64
	cnt         []int
	// half storage: the weights may be rounded to it before P·V (and
	// summed rounded or not); zero for f32. zeta is each weight's
	// absolute rounding error (below the format's normal range),
	// divided by the exact normaliser Z; wl the denominator's lower
	// bound after them (docs/oracle.md, "attention in half storage").
	half storage
	zeta []float64
	wl   float64
}

func newAttnRow(K, D int, sc, limit float64) *attnRow {
	return &attnRow{D: D, sc: sc, limit: limit,
		s: make([]float64, K), E: make([]float64, K), p: make([]float64, K), r: make([]float64, K),
		lo: make([]float64, K), hi: make([]float64, K), ups: make([]float64, 0, K), cnt: make([]int, K), zeta: make([]float64, K)}
}

// scores: s_j = sc * q.k_j for the n attended keys, each with its bound E_j.
func (a *attnRow) scores(qv []float32, kb []float32, n int) {
	D, sc := a.D, a.sc
	sMax, SMax := math.Inf(-1), 0.0
	for j := 0; j < n; j++ {
		var dot, S float64
		for t, qt := range qv {
			x := float64(qt) * float64(kb[j*D+t])
			dot += x
			S += math.Abs(x)
		}
		a.s[j] = sc * dot
		a.E[j] = sc * dotBound(S*(1+3*unit), dot, D, true, a.limit)
		a.E[j] += 4 * unit * sc * S
		sMax, SMax = math.Max(sMax, a.s[j]), math.Max(SMax, S)
	}
	a.sMax, a.eMax = sMax, 0
	for j := 0; j < n; j++ {
		a.E[j] += 4 * unit * sc * SMax // the shift m*sc*log2(e) rounded
		a.eMax = math.Max(a.eMax, a.E[j])
	}
}

// weights: the softmax weights p_j and their relative error r_j.
func (a *attnRow) weights(n int) {
	s, E, p, lo, hi, cnt := a.s, a.E, a.p, a.lo, a.hi, a.cnt
	var sum float64
	for j := 0; j < n; j++ {
		p[j] = math.Exp(s[j] - a.sMax)
		sum += p[j]
	}
	// Rescales of an online softmax: a term is rescaled only
	// when the running max of the computed scores rises after
	// it was added, so at most c_j times, c_j the number of
	// other keys whose computed score can exceed term j's.
	a.ups = a.ups[:0]
	for j := 0; j < n; j++ {
		a.ups = append(a.ups, s[j]+E[j])
	}
	ups := a.ups
	sort.Float64s(ups)
	for j := 0; j < n; j++ {
		p[j] /= sum
		low := s[j] - E[j]
		c := n - sort.Search(n, func(i int) bool { return ups[i] > low })
		if E[j] > 0 {
			c-- // key j itself
		}
		cnt[j] = c
		Dj := a.sMax - s[j] + E[j] + a.eMax
		th := (1+(expBase+expSlope*Dj)*unit)*math.Exp(unit*Dj) - 1
		rho := 0.0
		if c > 0 {
			rho = math.Expm1((expBase*float64(c) + (expSlope+1)*Dj) * unit)
		}
		hi[j] = math.Exp(E[j]) * (1 + th) * (1 + rho)
		lo[j] = math.Exp(-E[j]) * (1 - th) * (1 - rho)
		// Half storage: the weight, rounded to storage before P·V, is
		// below the normal range only if its lower bound relative to the
		// final computed maximum is (a running maximum is never above
		// the final one); there it may lose up to half the subnormal
		// spacing, unit·tiny, later rescaled by factors <= 1 (within
		// 1+rho). In the exact weights' units (the exact maximum) that is
		// at most e^eMax times more, the computed maximum being at most
		// eMax above the exact one; over Z, p's units.
		a.zeta[j] = 0
		if a.half.unit > 0 && math.Exp(s[j]-a.sMax-E[j]-a.eMax)*(1-th) < a.half.tiny {
			a.zeta[j] = a.half.unit * a.half.tiny * math.Exp(a.eMax) * (1 + rho) / sum
		}
	}
	// Roundings per term: the product with V (numerator only),
	// at most n-1 additions and c_j rescale products; in half storage
	// the weight's rounding to storage too, in the numerator and (where
	// the rounded weights are summed) the denominator.
	us := a.half.unit
	gam := func(k int) float64 { return (1+gamma(k))*(1+us) - 1 }
	var WL, WU, Zeta float64
	for j := 0; j < n; j++ {
		g1 := gam(n - 1 + cnt[j])
		WL += p[j] * lo[j] * (1 - g1)
		WU += p[j] * hi[j] * (1 + g1)
		Zeta += a.zeta[j]
	}
	WL, WU = WL-Zeta, WU+Zeta
	a.wl = WL
	for j := 0; j < n; j++ {
		gn, g1 := gam(n+cnt[j]), gam(n-1+cnt[j])
		up := hi[j] * (1 + gn) / (p[j]*hi[j]*(1-g1) + WL - p[j]*lo[j]*(1-g1))
		dn := lo[j] * (1 - gn) / (p[j]*lo[j]*(1+g1) + WU - p[j]*hi[j]*(1+g1))
		a.r[j] = math.Max(up-1, 1-dn)
		if !(lo[j] > 0) || !(WL > 0) {
			a.r[j] = math.Inf(1)
		}
	}
}

// output: the row's Dv outputs sum_j p_j v_j and their bounds.
func (a *attnRow) output(vb []float32, n, Dv int, want, bnd []float64) {
	for t := 0; t < Dv; t++ {
		var y, e, vm float64
		for j := 0; j < n; j++ {
			vv := float64(vb[j*Dv+t])
			y += a.p[j] * vv
			e += a.p[j] * a.r[j] * math.Abs(vv)
			if a.zeta[j] > 0 {
				e += a.zeta[j] * math.Abs(vv) / a.wl // a weight's absolute rounding, over the denominator's least
			}
			vm = math.Max(vm, math.Abs(vv))
		}
		want[t] = y
		bnd[t] = finite(((1+divRel)*e + divRel*math.Abs(y) + 4*float64(n)*tiny*(vm+1)) * slack)
	}
}
