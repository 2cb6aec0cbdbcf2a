package halide_test

import (
	"fmt"
	"math"
	"sort"
	"testing"
)

// An expect is one output's reference. kind tol: each element within
// rtol*mag (plus the storage rounding of the output dtype) of want;
// kind value: numerically equal to want (so -0 == +0); kind bits: the exact
// f32 bits; kind int: the exact integers.
type expect struct {
	kind string
	want []float64
	mag  []float64
	bits []uint32
	ints []int64
}

func tol(n int) expect { return expect{kind: "tol", want: make([]float64, n), mag: make([]float64, n)} }

func gelu64(x float64) float64 {
	c := math.Sqrt(2 / math.Pi)
	return 0.5 * x * (1 + math.Tanh(c*(x+0.044715*x*x*x)))
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// reference computes every output of op in float64 from the inputs as
// stored, with a magnitude for the tolerance: the sum of absolute terms
// that produced each element (a first-order bound on FP32 rounding).
func reference(op string, d map[string]int, eps float64, in []tensor) []expect {
	M, N, K := d["M"], d["N"], d["K"]
	x := func(t, i int) float64 { return in[t].float(i) }
	abs := math.Abs
	switch op {
	case "gemm", "gemm_relu", "gemm_gelu", "bmm":
		B := 1
		if op == "bmm" {
			B = d["B"]
		}
		e := tol(B * M * N)
		for b := 0; b < B; b++ {
			for i := 0; i < M; i++ {
				for j := 0; j < N; j++ {
					var s, m float64
					for k := 0; k < K; k++ {
						t := x(0, b*M*K+i*K+k) * x(1, b*K*N+k*N+j)
						s += t
						m += abs(t)
					}
					o := b*M*N + i*N + j
					switch op {
					case "gemm_relu":
						s, m = math.Max(0, 0.125*s+0.25), 0.125*m+0.25
					case "gemm_gelu":
						z := 0.125*s + 0.25
						s, m = gelu64(z), 1.2*(0.125*m+0.25)+abs(gelu64(z))
					}
					e.want[o], e.mag[o] = s, m
				}
			}
		}
		return []expect{e}
	case "gemv":
		e := tol(M)
		for i := 0; i < M; i++ {
			for k := 0; k < K; k++ {
				t := x(0, i*K+k) * x(1, k)
				e.want[i] += t
				e.mag[i] += abs(t)
			}
		}
		return []expect{e}
	case "add", "gelu_add", "swiglu":
		e := tol(M * N)
		for i := range e.want {
			a, b := x(0, i), x(1, i)
			switch op {
			case "add":
				e.want[i], e.mag[i] = a+b, abs(a)+abs(b)
			case "gelu_add":
				e.want[i] = gelu64(a + b)
				e.mag[i] = 1.2*(abs(a)+abs(b)) + abs(e.want[i])
			case "swiglu":
				e.want[i] = a * sigmoid64(a) * b
				e.mag[i] = abs(e.want[i]) * (1 + abs(a))
			}
		}
		return []expect{e}
	case "sigmoid_pair", "gelu_pair":
		y, dd := tol(M*N), tol(M*N)
		c := math.Sqrt(2 / math.Pi)
		for i := range y.want {
			v := x(0, i)
			if op == "sigmoid_pair" {
				s := sigmoid64(v)
				y.want[i], y.mag[i] = s, s*(1+abs(v))
				dd.want[i], dd.mag[i] = s*(1-s), s*(1+abs(v))
				continue
			}
			t := math.Tanh(c * (v + 0.044715*v*v*v))
			y.want[i], y.mag[i] = gelu64(v), abs(v)*(1+abs(v)*abs(v))
			g := 0.5 * v * c * (1 + 3*0.044715*v*v)
			dd.want[i] = 0.5*(1+t) + g*(1-t*t)
			dd.mag[i] = 0.5*(1+abs(t)) + abs(g)*(1+abs(v)*abs(v))
		}
		return []expect{y, dd}
	case "rope":
		R := d["R"]
		e := tol(M * N)
		for m := 0; m < M; m++ {
			for j := 0; j < N; j++ {
				o := m*N + j
				if j >= R {
					e.want[o] = x(0, o)
					continue
				}
				p := j / 2
				xe, xo := x(0, m*N+2*p), x(0, m*N+2*p+1)
				cs, sn := x(1, m*R/2+p), x(2, m*R/2+p)
				if j%2 == 0 {
					e.want[o] = xe*cs - xo*sn
				} else {
					e.want[o] = xe*sn + xo*cs
				}
				e.mag[o] = abs(xe*cs) + abs(xo*sn) + abs(xe*sn) + abs(xo*cs)
			}
		}
		return []expect{e}
	case "sum":
		e := tol(M)
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				e.want[i] += x(0, i*N+j)
				e.mag[i] += abs(x(0, i*N+j))
			}
		}
		return []expect{e}
	case "max":
		e := expect{kind: "value", want: make([]float64, M)}
		for i := 0; i < M; i++ {
			e.want[i] = math.Inf(-1)
			for j := 0; j < N; j++ {
				e.want[i] = math.Max(e.want[i], x(0, i*N+j))
			}
		}
		return []expect{e}
	case "softmax":
		e := tol(M * N)
		for i := 0; i < M; i++ {
			mx := math.Inf(-1)
			for j := 0; j < N; j++ {
				mx = math.Max(mx, x(0, i*N+j))
			}
			var s float64
			for j := 0; j < N; j++ {
				s += math.Exp(x(0, i*N+j) - mx)
			}
			for j := 0; j < N; j++ {
				e.want[i*N+j] = math.Exp(x(0, i*N+j)-mx) / s
				e.mag[i*N+j] = e.want[i*N+j]
			}
		}
		return []expect{e}
	case "rmsnorm", "layernorm", "residual_layernorm":
		// Inputs after X (and R): W, then B.
		w := 1
		h := func(i int) float64 { return x(0, i) }
		hm := func(i int) float64 { return abs(x(0, i)) }
		var H expect
		if op == "residual_layernorm" {
			w = 2
			h = func(i int) float64 { return x(0, i) + x(1, i) }
			hm = func(i int) float64 { return abs(x(0, i)) + abs(x(1, i)) }
			H = tol(M * N)
			for i := range H.want {
				H.want[i], H.mag[i] = h(i), hm(i)
			}
		}
		e := tol(M * N)
		for i := 0; i < M; i++ {
			var mean, ss float64
			if op != "rmsnorm" {
				for j := 0; j < N; j++ {
					mean += h(i*N + j)
				}
				mean /= float64(N)
			}
			for j := 0; j < N; j++ {
				dv := h(i*N+j) - mean
				ss += dv * dv
			}
			r := 1 / math.Sqrt(ss/float64(N)+eps)
			for j := 0; j < N; j++ {
				y := (h(i*N+j) - mean) * r * x(w, j)
				e.mag[i*N+j] = abs(y) + 1e-3*hm(i*N+j)*r*abs(x(w, j))
				if op != "rmsnorm" {
					y += x(w+1, j)
					e.mag[i*N+j] += abs(x(w+1, j))
				}
				e.want[i*N+j] = y
			}
		}
		if op == "residual_layernorm" {
			return []expect{e, H}
		}
		return []expect{e}
	case "cross_entropy":
		e := tol(M)
		for i := 0; i < M; i++ {
			mx := math.Inf(-1)
			for j := 0; j < N; j++ {
				mx = math.Max(mx, x(0, i*N+j))
			}
			var s, spread float64
			for j := 0; j < N; j++ {
				s += math.Exp(x(0, i*N+j) - mx)
				spread = math.Max(spread, mx-x(0, i*N+j))
			}
			xt := x(0, i*N+int(in[1].int(i)))
			e.want[i] = math.Log(s) + mx - xt
			e.mag[i] = abs(mx) + abs(xt) + math.Log(s) + spread
		}
		return []expect{e}
	case "scan_ordered":
		// The FP32 sequential left fold, bit for bit.
		e := expect{kind: "bits", bits: make([]uint32, M*N)}
		for i := 0; i < M; i++ {
			var acc float32
			for j := 0; j < N; j++ {
				v := float32(x(0, i*N+j))
				if j == 0 {
					acc = v
				} else {
					acc = acc + v
				}
				e.bits[i*N+j] = math.Float32bits(acc)
			}
		}
		return []expect{e}
	case "scan":
		e := tol(M * N)
		for i := 0; i < M; i++ {
			var s, m float64
			for j := 0; j < N; j++ {
				s += x(0, i*N+j)
				m += abs(x(0, i*N+j))
				e.want[i*N+j], e.mag[i*N+j] = s, m
			}
		}
		return []expect{e}
	case "argmax":
		v, ix := expect{kind: "bits", bits: make([]uint32, M)}, expect{kind: "int", ints: make([]int64, M)}
		for i := 0; i < M; i++ {
			best := 0
			for j := 1; j < N; j++ {
				if x(0, i*N+j) > x(0, i*N+best) {
					best = j
				}
			}
			v.bits[i], ix.ints[i] = uint32(in[0].bits(i*N+best)), int64(best)
		}
		return []expect{v, ix}
	case "topk", "sort":
		if op == "sort" {
			K = N
		}
		v, ix := expect{kind: "bits", bits: make([]uint32, M*K)}, expect{kind: "int", ints: make([]int64, M*K)}
		for i := 0; i < M; i++ {
			idx := make([]int, N)
			for j := range idx {
				idx[j] = j
			}
			sort.SliceStable(idx, func(a, b int) bool {
				xa, xb := x(0, i*N+idx[a]), x(0, i*N+idx[b])
				if op == "topk" {
					return xa > xb
				}
				return xa < xb
			})
			for k := 0; k < K; k++ {
				v.bits[i*K+k] = uint32(in[0].bits(i*N + idx[k]))
				ix.ints[i*K+k] = int64(idx[k])
			}
		}
		return []expect{v, ix}
	case "embedding":
		D := d["D"]
		e := expect{kind: "bits", bits: make([]uint32, M*D)}
		for m := 0; m < M; m++ {
			id := int(in[1].int(m))
			for j := 0; j < D; j++ {
				e.bits[m*D+j] = uint32(in[0].bits(id*D + j))
			}
		}
		return []expect{e}
	case "attention":
		B, Hq, Hkv, Q, D, Dv := d["B"], d["Hq"], d["Hkv"], d["Q"], d["D"], d["Dv"]
		G, scale := Hq/Hkv, 1/math.Sqrt(float64(D))
		e := tol(B * Hq * Q * Dv)
		for b := 0; b < B; b++ {
			for h := 0; h < Hq; h++ {
				kv := h / G
				for q := 0; q < Q; q++ {
					last := q + K - Q
					s := make([]float64, last+1)
					mx, spread := math.Inf(-1), 0.0
					for k := 0; k <= last; k++ {
						var dot, dm float64
						for dd := 0; dd < D; dd++ {
							t := x(0, ((b*Hq+h)*Q+q)*D+dd) * x(1, ((b*Hkv+kv)*K+k)*D+dd)
							dot += t
							dm += abs(t)
						}
						s[k] = dot * scale
						mx = math.Max(mx, s[k])
						spread = math.Max(spread, dm*scale)
					}
					var l float64
					for k := range s {
						s[k] = math.Exp(s[k] - mx)
						l += s[k]
					}
					for dv := 0; dv < Dv; dv++ {
						var o, m float64
						for k := range s {
							t := s[k] * x(2, ((b*Hkv+kv)*K+k)*Dv+dv)
							o += t
							m += abs(t)
						}
						i := ((b*Hq+h)*Q+q)*Dv + dv
						e.want[i], e.mag[i] = o/l, m/l*(1+spread)
					}
				}
			}
		}
		return []expect{e}
	}
	return nil
}

// compare checks got against e and reports at most five elements.
func compare(t *testing.T, what string, got tensor, e expect) {
	t.Helper()
	n := len(e.want) + len(e.bits) + len(e.ints)
	if got.len() != n {
		t.Errorf("%s: %d output elements, want %d", what, got.len(), n)
		return
	}
	// Half storage rounds each output once more (at most half an ulp: 2^-11
	// relative for f16, 2^-8 for bf16); its smallest subnormal sets atol.
	rtol, store, atol := 1e-4, 0.0, 1e-30
	switch got.dtype {
	case "f16":
		store, atol = 1.0/1024, 1.0/(1<<24)
	case "bf16":
		store = 1.0 / 128
	}
	bad := 0
	for i := 0; i < n; i++ {
		var ok bool
		var msg string
		switch e.kind {
		case "tol":
			g := got.float(i)
			diff := math.Abs(g - e.want[i])
			lim := rtol*e.mag[i] + store*math.Abs(e.want[i]) + atol
			ok = diff <= lim
			msg = fmt.Sprintf("%s[%d] = %g, want %g (|diff| %.3g > tol %.3g)", what, i, g, e.want[i], diff, lim)
		case "value":
			ok = got.float(i) == e.want[i]
			msg = fmt.Sprintf("%s[%d] = %g, want %g", what, i, got.float(i), e.want[i])
		case "bits":
			ok = uint32(got.bits(i)) == e.bits[i]
			msg = fmt.Sprintf("%s[%d] = %#08x (%g), want %#08x (%g)", what, i, got.bits(i), got.float(i), e.bits[i], math.Float32frombits(e.bits[i]))
		case "int":
			ok = got.int(i) == e.ints[i]
			msg = fmt.Sprintf("%s[%d] = %d, want %d", what, i, got.int(i), e.ints[i])
		}
		if !ok {
			if bad < 5 {
				t.Error(msg)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements wrong", what, bad, n)
	}
}
