package oracle

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// Binary32 implementations of the ops added with issue 3, in several
// evaluation orders, for the property tests.

func tanhLibm(t float32) float32 { return float32(math.Tanh(float64(t))) }

// tanhExp is 1 - 2/(exp(2t)+1) in binary32 with Halide's exp.
func tanhExp(t float32) float32 {
	if t > 9 {
		return 1
	}
	if t < -9 {
		return -1
	}
	e := expHalide(2 * t)
	return 1 - 2/(e+1)
}

const geluK, geluC = float32(0.7978845608028654), float32(0.044715)

// gelu32 evaluates the tanh GELU and its derivative in binary32; form
// selects the association of the inner polynomial and the product.
func gelu32(x float32, tanh func(float32) float32, form int) (float32, float32) {
	x2 := float32(x * x)
	var t float32
	if form == 0 {
		x3 := float32(x2 * x)
		t = float32(geluK * (x + float32(geluC*x3)))
	} else {
		t = float32(float32(geluK*x) * (1 + float32(geluC*x2)))
	}
	T := tanh(t)
	var y float32
	if form == 0 {
		y = float32(float32(0.5*x) * (1 + T))
	} else {
		y = float32(0.5 * (x + float32(x*T)))
	}
	left := float32(0.5 * (1 + T))
	om := 1 - float32(T*T)
	poly := 1 + float32(3*geluC*x2)
	right := float32(float32(float32(float32(0.5*x)*om)*geluK) * poly)
	return y, left + right
}

func sigmoid32(x float32, exp func(float32) float32, form int) float32 {
	if form == 0 && x < -88 {
		return 0 // exp(-x) overflows: 1/Inf
	}
	if form == 0 || x > 0 {
		return 1 / (1 + exp(-x))
	}
	e := exp(x)
	return e / (1 + e)
}

// epilogue applies gemm_relu's or gemm_gelu's affine map and activation.
func epilogue(op string, acc float32, fma bool) float32 {
	var z float32
	if fma {
		z = fma32(acc, 0.125, 0.25)
	} else {
		z = float32(acc*0.125) + 0.25
	}
	if op == "gemm_relu" {
		return max(0, z)
	}
	y, _ := gelu32(z, tanhLibm, 0)
	return y
}

func matImpl(op string, d dotter, fmaEpi bool) impl {
	return impl{name: op + "/" + d.name, run: func(c Case, in [][]float32) []float32 {
		B, M, N, K := 1, c.Dims["M"], c.Dims["N"], c.Dims["K"]
		switch op {
		case "bmm":
			B = c.Dims["B"]
		case "gemv":
			N = 1
		}
		out := make([]float32, B*M*N)
		bt := make([]float32, N*K)
		for b := 0; b < B; b++ {
			a, bb := in[0][b*M*K:], in[1][b*K*N:]
			for k := 0; k < K; k++ {
				for j := 0; j < N; j++ {
					bt[j*K+k] = bb[k*N+j]
				}
			}
			for i := 0; i < M; i++ {
				for j := 0; j < N; j++ {
					acc := d.fn(a[i*K:(i+1)*K], bt[j*K:(j+1)*K])
					if op == "gemm_relu" || op == "gemm_gelu" {
						acc = epilogue(op, acc, fmaEpi)
					}
					out[(b*M+i)*N+j] = acc
				}
			}
		}
		return out
	}}
}

func pointwiseImpl(op, name string, tanh func(float32) float32, exp func(float32) float32, form int) impl {
	return impl{name: op + "/" + name, runT: func(c Case, in []Tensor) []Tensor {
		x := in[0].F
		y := make([]float32, len(x))
		var d []float32
		if op == "gelu_pair" || op == "sigmoid_pair" {
			d = make([]float32, len(x))
		}
		for i, xv := range x {
			switch op {
			case "gelu_add":
				y[i], _ = gelu32(xv+in[1].F[i], tanh, form)
			case "gelu_pair":
				y[i], d[i] = gelu32(xv, tanh, form)
			case "sigmoid_pair":
				s := sigmoid32(xv, exp, form)
				y[i] = s
				if form == 0 || xv > 30 || xv < -30 {
					d[i] = float32(s * (1 - s))
				} else {
					e := exp(-xv)
					d[i] = e / float32((1+e)*(1+e))
				}
			case "swiglu":
				s := sigmoid32(xv, exp, form)
				if form == 0 {
					y[i] = float32(float32(xv*s) * in[1].F[i])
				} else {
					y[i] = float32(xv * float32(s*in[1].F[i]))
				}
			}
		}
		out := []Tensor{F32(y)}
		if d != nil {
			out = append(out, F32(d))
		}
		return out
	}}
}

func ropeImpl(fma bool) impl {
	name := "rope/plain"
	if fma {
		name = "rope/fma"
	}
	return impl{name: name, run: func(c Case, in [][]float32) []float32 {
		M, N, R := c.Dims["M"], c.Dims["N"], c.Dims["R"]
		x, cs, sn := in[0], in[1], in[2]
		out := append([]float32(nil), x...)
		for m := 0; m < M; m++ {
			for i := 0; i < R/2; i++ {
				co, si := cs[m*R/2+i], sn[m*R/2+i]
				x0, x1 := x[m*N+2*i], x[m*N+2*i+1]
				if fma {
					out[m*N+2*i] = fma32(x0, co, -float32(x1*si))
					out[m*N+2*i+1] = fma32(x1, co, float32(x0*si))
				} else {
					out[m*N+2*i] = float32(x0*co) - float32(x1*si)
					out[m*N+2*i+1] = float32(x0*si) + float32(x1*co)
				}
			}
		}
		return out
	}}
}

func maxImpl(c Case, in [][]float32) []float32 {
	M, N := c.Dims["M"], c.Dims["N"]
	out := make([]float32, M)
	for i := range out {
		m := in[0][i*N]
		for _, v := range in[0][i*N : (i+1)*N] {
			if v > m {
				m = v
			}
		}
		out[i] = m
	}
	return out
}

// residualImpl computes H = fl(X+R), stores it in the case's dtype, and
// normalises either the binary32 sum (fused) or the stored H (unfused).
func residualImpl(v normVariant, unfused bool) impl {
	ln := layernormImpl(v)
	name := "residual_layernorm/fused/" + v.name
	if unfused {
		name = "residual_layernorm/unfused/" + v.name
	}
	return impl{name: name, runT: func(c Case, in []Tensor) []Tensor {
		h := make([]float32, len(in[0].F))
		hs := make([]float32, len(h))
		for i := range h {
			h[i] = in[0].F[i] + in[1].F[i]
			hs[i] = toStorage(c.Dtype, h[i])
		}
		src := h
		if unfused {
			src = hs
		}
		y := ln.run(c, [][]float32{src, in[2].F, in[3].F})
		return []Tensor{F32(y), F32(h)}
	}}
}

func crossEntropyImplT(name string, exp func(float32) float32, d dotter) impl {
	return impl{name: "cross_entropy/" + name, runT: func(c Case, in []Tensor) []Tensor {
		M, N := c.Dims["M"], c.Dims["N"]
		out := make([]float32, M)
		e := make([]float32, N)
		one := ones(N)
		for i := 0; i < M; i++ {
			x := in[0].F[i*N : (i+1)*N]
			m := x[0]
			for _, v := range x {
				m = max(m, v)
			}
			for j, v := range x {
				e[j] = exp(v - m)
			}
			s := d.fn(e, one)
			ls := float32(math.Log(float64(s)))
			out[i] = ls + (m - x[in[1].I[i]])
		}
		return []Tensor{F32(out)}
	}}
}

// crossEntropyOnline takes logsumexp from the online normaliser
// (onlineMaxSum); a name ending in "/sorted" feeds it the row in ascending
// order, so every element is a new maximum.
func crossEntropyOnline(name string, exp func(float32) float32) impl {
	return impl{name: "cross_entropy/" + name, runT: func(c Case, in []Tensor) []Tensor {
		M, N := c.Dims["M"], c.Dims["N"]
		out := make([]float32, M)
		for i := 0; i < M; i++ {
			x := in[0].F[i*N : (i+1)*N]
			if strings.HasSuffix(name, "/sorted") {
				x = slices.Sorted(slices.Values(x))
			}
			m, s := onlineMaxSum(x, exp, 1)
			out[i] = float32(math.Log(float64(s))) + (m - in[0].F[i*N+int(in[1].I[i])])
		}
		return []Tensor{F32(out)}
	}}
}

// scanImpl: 0 sequential, 1 Blelloch (up-sweep, down-sweep) exclusive
// scan plus the element, 2 blocked by 16 with block totals scanned.
func scanImpl(kind int) impl {
	names := []string{"seq", "blelloch", "blocked16"}
	return impl{name: "scan/" + names[kind], run: func(c Case, in [][]float32) []float32 {
		M, N := c.Dims["M"], c.Dims["N"]
		out := make([]float32, M*N)
		for i := 0; i < M; i++ {
			x, y := in[0][i*N:(i+1)*N], out[i*N:(i+1)*N]
			switch kind {
			case 0:
				var acc float32
				for j, v := range x {
					acc = acc + v
					y[j] = acc
				}
			case 1:
				n := 1
				for n < N {
					n *= 2
				}
				a := make([]float32, n)
				copy(a, x)
				for d := 1; d < n; d *= 2 {
					for k := 2*d - 1; k < n; k += 2 * d {
						a[k] = a[k-d] + a[k]
					}
				}
				a[n-1] = 0
				for d := n / 2; d >= 1; d /= 2 {
					for k := 2*d - 1; k < n; k += 2 * d {
						t := a[k-d]
						a[k-d] = a[k]
						a[k] = a[k] + t
					}
				}
				for j := range x {
					y[j] = a[j] + x[j]
				}
			default:
				var carry float32
				for b := 0; b < N; b += 16 {
					var acc float32
					for j := b; j < min(b+16, N); j++ {
						acc = acc + x[j]
						y[j] = carry + acc
					}
					carry = carry + acc
				}
			}
		}
		return out
	}}
}

func argmaxImpl(c Case, in []Tensor) []Tensor {
	M, N := c.Dims["M"], c.Dims["N"]
	v, idx := make([]float32, M), make([]int64, M)
	for i := 0; i < M; i++ {
		row := in[0].F[i*N : (i+1)*N]
		b := 0
		for j, x := range row {
			if x > row[b] {
				b = j
			}
		}
		v[i], idx[i] = row[b], int64(b)
	}
	return []Tensor{F32(v), I64(idx)}
}

// rankImpl sorts each row; reverseTies breaks ties by descending index
// (legal under the standard contract only).
func rankImpl(op string, reverseTies bool) impl {
	name := op + "/stable"
	if reverseTies {
		name = op + "/reverse-ties"
	}
	return impl{name: name, runT: func(c Case, in []Tensor) []Tensor {
		M, N := c.Dims["M"], c.Dims["N"]
		K := N
		if op == "topk" {
			K = c.Dims["K"]
		}
		v, idx := make([]float32, M*K), make([]int64, M*K)
		order := make([]int, N)
		for i := 0; i < M; i++ {
			row := in[0].F[i*N : (i+1)*N]
			for j := range order {
				order[j] = j
			}
			sort.Slice(order, func(a, b int) bool {
				x, y := row[order[a]], row[order[b]]
				if x != y {
					if op == "topk" {
						return x > y
					}
					return x < y
				}
				if reverseTies {
					return order[a] > order[b]
				}
				return order[a] < order[b]
			})
			for j := 0; j < K; j++ {
				v[i*K+j], idx[i*K+j] = row[order[j]], int64(order[j])
			}
		}
		return []Tensor{F32(v), I64(idx)}
	}}
}

func embeddingImpl(c Case, in []Tensor) []Tensor {
	D := c.Dims["D"]
	y := make([]float32, len(in[1].I)*D)
	for m, id := range in[1].I {
		copy(y[m*D:(m+1)*D], in[0].F[int(id)*D:(int(id)+1)*D])
	}
	return []Tensor{F32(y)}
}

// attentionImpl: blockN 0 is the standard two-pass softmax (scores, max,
// exponentials, sum, then P·V divided by the sum); blockN > 0 is the
// FlashAttention-2 recurrence over key blocks of that size, with a running
// max, rescaled running sum and accumulator, divided at the end. A name
// ending in "/sorted" visits the keys in ascending score order, so that
// every key is a new maximum: the most rescales any order can cause.
// A name holding "/p-half" rounds each weight to the case's storage dtype
// before its product with V, as FlashAttention's half kernels do; with
// "/p-half-sum" the running sum adds the rounded weights too.
func attentionImpl(name string, blockN int, exp func(float32) float32, d dotter, prescale bool) impl {
	ascending := strings.HasSuffix(name, "/sorted")
	pHalf, pHalfSum := strings.Contains(name, "/p-half"), strings.Contains(name, "/p-half-sum")
	// "/p-mant3", "/p-mant2": a cheat, the weights' mantissa cut to 3 or
	// 2 bits (the precision of FP8 E4M3, E5M2; the exponent range kept).
	pBits := 0 // significant bits, the implicit one included
	if strings.Contains(name, "/p-mant3") {
		pBits = 4
	} else if strings.Contains(name, "/p-mant2") {
		pBits = 3
	}
	return impl{name: "attention/" + name, run: func(c Case, in [][]float32) []float32 {
		rp := func(x float32) float32 { // the weight as P·V sees it
			if pBits > 0 {
				return roundTo(x, pBits)
			}
			if pHalf {
				return toStorage(c.Dtype, x)
			}
			return x
		}
		rs := func(x float32) float32 { // the weight as the sum sees it
			if pHalfSum {
				return toStorage(c.Dtype, x)
			}
			return x
		}
		B, Hq, Hkv, Q, K, D, Dv := c.Dims["B"], c.Dims["Hq"], c.Dims["Hkv"], c.Dims["Q"], c.Dims["K"], c.Dims["D"], c.Dims["Dv"]
		sc := float32(1 / math.Sqrt(float64(D)))
		q, k, v := in[0], in[1], in[2]
		out := make([]float32, B*Hq*Q*Dv)
		s := make([]float32, K)
		qs := make([]float32, D)
		for b := 0; b < B; b++ {
			for h := 0; h < Hq; h++ {
				hk := h / (Hq / Hkv)
				kb, vb := k[(b*Hkv+hk)*K*D:], v[(b*Hkv+hk)*K*Dv:]
				for qi := 0; qi < Q; qi++ {
					qv := q[((b*Hq+h)*Q+qi)*D:][:D]
					n := qi + K - Q + 1
					for t := range qv {
						qs[t] = float32(qv[t] * sc)
					}
					for j := 0; j < n; j++ {
						if prescale {
							s[j] = d.fn(qs, kb[j*D:(j+1)*D])
						} else {
							s[j] = float32(d.fn(qv, kb[j*D:(j+1)*D]) * sc)
						}
					}
					o := out[((b*Hq+h)*Q+qi)*Dv:][:Dv]
					if blockN == 0 {
						m := s[0]
						for _, x := range s[:n] {
							m = max(m, x)
						}
						var l float32
						p := make([]float32, n)
						for j := range p {
							p[j] = exp(s[j] - m)
							l = l + rs(p[j])
						}
						for t := 0; t < Dv; t++ {
							var acc float32
							for j := 0; j < n; j++ {
								acc = acc + float32(rp(p[j])*vb[j*Dv+t])
							}
							o[t] = acc / l
						}
						continue
					}
					ord := make([]int, n)
					for j := range ord {
						ord[j] = j
					}
					if ascending {
						sort.SliceStable(ord, func(a, b int) bool { return s[ord[a]] < s[ord[b]] })
					}
					m := float32(math.Inf(-1))
					var l float32
					acc := make([]float32, Dv)
					for j0 := 0; j0 < n; j0 += blockN {
						j1 := min(j0+blockN, n)
						mb := m
						for _, j := range ord[j0:j1] {
							mb = max(mb, s[j])
						}
						alpha := float32(0)
						if !math.IsInf(float64(m), -1) {
							alpha = exp(m - mb)
						}
						l = float32(l * alpha)
						for t := range acc {
							acc[t] = float32(acc[t] * alpha)
						}
						for _, j := range ord[j0:j1] {
							p := exp(s[j] - mb)
							l = l + rs(p)
							for t := range acc {
								acc[t] = fma32(rp(p), vb[j*Dv+t], acc[t])
							}
						}
						m = mb
					}
					for t := range acc {
						o[t] = acc[t] / l
					}
				}
			}
		}
		return out
	}}
}

func moreImpls(op string) []impl {
	var out []impl
	switch op {
	case "gemm_relu", "gemm_gelu", "bmm", "gemv":
		for i, d := range []dotter{dotters[0], dotters[1], dotters[4], dotters[6], dotters[8], dotters[11]} {
			out = append(out, matImpl(op, d, i%2 == 1))
		}
	case "gelu_add", "gelu_pair", "sigmoid_pair", "swiglu":
		out = append(out,
			pointwiseImpl(op, "libm/0", tanhLibm, expLibm, 0),
			pointwiseImpl(op, "exp/1", tanhExp, expHalide, 1),
			pointwiseImpl(op, "base2/0", tanhExp, expBase2, 0),
			pointwiseImpl(op, "libm/1", tanhLibm, expBase2, 1))
	case "rope":
		out = append(out, ropeImpl(false), ropeImpl(true))
	case "max":
		out = append(out, impl{name: "max/seq", run: maxImpl})
	case "residual_layernorm":
		for _, v := range []normVariant{
			{"two-pass/seq/centred", seqD, 0, rsqrtDiv, 0, 0},
			{"one-pass/blocked16/scaled/centred", blockedD, 2, rsqrtNewton, 0, 1},
			{"welford/pytorch", seqD, 0, rsqrtDiv, 2, 2},
		} {
			out = append(out, residualImpl(v, false), residualImpl(v, true))
		}
	case "cross_entropy":
		out = append(out,
			crossEntropyImplT("libm/seq", expLibm, seqD),
			crossEntropyImplT("halide/lanes16", expHalide, lanesD),
			crossEntropyImplT("base2/pairwise", expBase2, pairD),
			crossEntropyImplT("libm/sorted", expLibm, dotters[11]),
			crossEntropyOnline("halide/online-seq", expHalide),
			crossEntropyOnline("edge/online-seq/sorted", expEdge))
	case "scan_ordered":
		out = append(out, scanImpl(0))
	case "scan":
		out = append(out, scanImpl(0), scanImpl(1), scanImpl(2))
	case "argmax":
		out = append(out, impl{name: "argmax/seq", runT: argmaxImpl})
	case "topk", "sort":
		out = append(out, rankImpl(op, false), rankImpl(op, true))
	case "embedding":
		out = append(out, impl{name: "embedding/copy", runT: embeddingImpl})
	case "attention":
		out = append(out,
			attentionImpl("two-pass/libm/seq", 0, expLibm, seqD, false),
			attentionImpl("flash16/halide/lanes16-prescaled", 16, expHalide, lanesD, true),
			attentionImpl("online1/base2/pairwise", 1, expBase2, pairD, false),
			attentionImpl("flash64/libm/fma", 64, expLibm, dotters[1], true),
			attentionImpl("online1/libm/seq/sorted", 1, expLibm, seqD, false),
			attentionImpl("online1/edge/sorted-dot/sorted", 1, expEdge, dotters[11], false),
			attentionImpl("flash64/libm/fma/p-half", 64, expLibm, dotters[1], true),
			attentionImpl("two-pass/libm/seq/p-half-sum", 0, expLibm, seqD, false),
			attentionImpl("online1/edge/sorted-dot/p-half-sum/sorted", 1, expEdge, dotters[11], false))
	}
	return out
}
