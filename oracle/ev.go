package oracle

import "math"

// ev is a quantity an implementation computes in binary32: v is its exact
// value (evaluated in float64) and e bounds |computed - v| for every
// conforming evaluation of the expression it came from. The operations
// below are the forward error analysis of docs/oracle.md, "Pointwise
// expressions": each propagates the operands' errors exactly (worst case)
// and adds one rounding, so a bound built from them holds for the
// expression tree it follows. Different trees for one formula are covered
// by taking the largest e over the trees (worst).
type ev struct{ v, e float64 }

// exactIn is an input element: exact.
func exactIn(x float32) ev { return ev{float64(x), 0} }

// rounded adds one binary32 rounding to a result whose exact value is v
// and whose pre-rounding error is at most e: |fl(x) - x| <= u|x| <=
// u(|v| + e) for a normal result, at most tiny if it is flushed. A result
// computed without error from exact operands is exact when v is a binary32
// number.
func rounded(v, e float64) ev {
	if e == 0 && float64(float32(v)) == v {
		return ev{v, 0}
	}
	return ev{v, e + unit*(math.Abs(v)+e) + tiny}
}

// cnst is a constant c as the binary32 literal nearest to it.
func cnst(c float64) ev {
	if float64(float32(c)) == c {
		return ev{c, 0}
	}
	return ev{c, unit * math.Abs(c)}
}

func evAdd(a, b ev) ev { return rounded(a.v+b.v, a.e+b.e) }
func evSub(a, b ev) ev { return rounded(a.v-b.v, a.e+b.e) }

func evMul(a, b ev) ev {
	return rounded(a.v*b.v, math.Abs(a.v)*b.e+math.Abs(b.v)*a.e+a.e*b.e)
}

// evScale multiplies by a power of two p: exact unless the result is
// subnormal.
func evScale(a ev, p float64) ev {
	if a.e == 0 && float64(float32(a.v*p)) == a.v*p {
		return ev{a.v * p, 0}
	}
	return ev{a.v * p, a.e*p + tiny}
}

// evDiv is a quotient with the division allowance divRel.
func evDiv(a, b ev) ev {
	v := a.v / b.v
	lo := math.Abs(b.v) - b.e
	if !(lo > 0) {
		return ev{v, math.Inf(1)}
	}
	e := (math.Abs(a.v)*b.e + math.Abs(b.v)*a.e) / (math.Abs(b.v) * lo)
	return ev{v, e + divRel*(math.Abs(v)+e) + tiny}
}

// evExp is exp with the exp allowance at the argument actually used:
// |exp32(d) - e^d| <= (expBase + expSlope*|d|)*u*e^d, plus tiny for a
// flushed result.
func evExp(a ev) ev {
	v := math.Exp(a.v)
	prop := v * math.Expm1(a.e)
	d := math.Abs(a.v) + a.e
	return ev{v, prop + (expBase+expSlope*d)*unit*(v+prop) + tiny}
}

// evTanh is tanh with the tanh allowance: |tanh32(t) - tanh(t)| <=
// tanhRel*|tanh(t)| + tanhAbs at the binary32 argument t used.
func evTanh(a ev) ev {
	v := math.Tanh(a.v)
	// tanh' = sech^2 is largest at the point of the interval nearest 0.
	near := math.Max(0, math.Abs(a.v)-a.e)
	sech := 1 / math.Cosh(near)
	prop := math.Min(a.e*sech*sech, 2)
	return ev{v, prop + tanhRel*(math.Abs(v)+prop) + tanhAbs}
}

// toStore adds the rounding of a binary32 result to the storage dtype (no
// change for f32): u_s relative, plus the format's smallest normal for a
// subnormal or flushed result. It is exact when e is 0 and v is a storage
// value.
func toStore(dtype string, a ev) ev {
	if dtype == "f32" || dtype == "" {
		return a
	}
	s := storageOf(dtype)
	if a.e == 0 && representable(dtype, a.v) {
		return a
	}
	return ev{a.v, a.e + s.unit*(math.Abs(a.v)+a.e) + s.tiny}
}

// worst returns the first value with the largest error of several
// evaluation trees of one formula.
func worst(xs ...ev) ev {
	w := xs[0]
	for _, x := range xs[1:] {
		if x.e > w.e || x.e != x.e {
			w.e = x.e
		}
	}
	return w
}

// gelu is the tanh form 0.5*x*(1 + tanh(k*(x + c*x^3))) of docs/protocol.md
// and its derivative, over the evaluation trees of docs/oracle.md.
func gelu(x ev) (y, d ev) {
	const c = 0.044715
	k := math.Sqrt(2 / math.Pi)
	x2 := evMul(x, x)
	// inner: k*(x + c*x^3) or (k*x)*(1 + c*x^2)
	tA := evMul(cnst(k), evAdd(x, evMul(cnst(c), evMul(x2, x))))
	tB := evMul(evMul(cnst(k), x), evAdd(cnst(1), evMul(cnst(c), x2)))
	t := worst(tA, tB)
	T := evTanh(t)
	onep := evAdd(cnst(1), T)
	hx := evScale(x, 0.5)
	y = worst(
		evMul(hx, onep),                             // (0.5x)(1+T)
		evScale(evAdd(x, evMul(x, T)), 0.5),         // 0.5(x + xT)
		evMul(x, evAdd(cnst(0.5), evScale(T, 0.5))), // x(0.5 + 0.5T)
	)
	// d = 0.5(1+T) + 0.5x(1-T^2)k(1+3c x^2)
	left := evScale(onep, 0.5)
	omA := evSub(cnst(1), evMul(T, T))
	omB := evMul(evSub(cnst(1), T), onep)
	om := worst(omA, omB)
	poly := evAdd(cnst(1), evMul(cnst(3*c), x2))
	right := worst(
		evMul(evMul(evMul(hx, om), cnst(k)), poly),
		evMul(evMul(hx, om), evMul(cnst(k), poly)),
	)
	d = evAdd(left, right)
	return y, d
}

// sigmoid is 1/(1+exp(-x)) or exp(x)/(1+exp(x)) (the stable form for
// negative x), with exp and division allowances. Where exp(-x) overflows
// binary32 (x < -88) the first form returns 0 or a flushed value, within
// sigma(x) + tiny of the answer.
func sigmoid(x ev) ev {
	neg := ev{-x.v, x.e}
	var forms []ev
	if x.v-x.e > -80 {
		forms = append(forms, evDiv(cnst(1), evAdd(cnst(1), evExp(neg))))
	} else {
		s := 1 / (1 + math.Exp(-x.v))
		forms = append(forms, ev{s, math.Exp(x.v+x.e) + 2*tiny})
	}
	if x.v+x.e < 80 {
		forms = append(forms, evDiv(evExp(x), evAdd(cnst(1), evExp(x))))
	}
	return worst(forms...)
}

// sigmoidDeriv is s(1-s) from a computed s, or, while exp(-x) and its
// square stay finite (|x| < 40), e/(1+e)^2 with e = exp(-x).
func sigmoidDeriv(x, s ev) ev {
	forms := []ev{evMul(s, evSub(cnst(1), s))}
	if math.Abs(x.v)+x.e < 40 {
		e := evExp(ev{-x.v, x.e})
		onep := evAdd(cnst(1), e)
		forms = append(forms, evDiv(e, evMul(onep, onep)))
	}
	return worst(forms...)
}
