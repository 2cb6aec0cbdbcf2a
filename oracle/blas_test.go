package oracle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// withGonum runs f with [dgemm] set to gonum's, as a CGO_ENABLED=0 build
// computes: how a test gets the packet the GPU machine's build captures.
func withGonum(f func()) {
	saved := dgemm
	dgemm = dgemmGo
	defer func() { dgemm = saved }()
	f()
}

// epilogueOut is the expected value and bound of gemm_relu or gemm_gelu at
// z, as refGemmAct and Reference's rounding to storage compute them.
func epilogueOut(op, dtype string, z ev) (want, bnd float64) {
	var y ev
	if op == "gemm_gelu" {
		y, _ = gelu(z)
	} else {
		y = relu(z)
	}
	return y.v, storeBound(dtype, y.v, finite(y.e*slack))
}

// randF32 is n binary32 values, roughly normal.
func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func absWiden(x []float32) []float64 {
	y := widen(x)
	for i := range y {
		y[i] = math.Abs(y[i])
	}
	return y
}

// TestDgemmAgreesWithGonum: this build's dgemm (OpenBLAS where cgo is on)
// and gonum's agree within the FP64 tolerance dotTol on odd shapes, and
// both set C to 0 when K = 0 (refGemm never asks: Validate refuses a
// dimension below 1).
func TestDgemmAgreesWithGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range [][3]int{{1, 1, 1}, {3, 5, 7}, {65, 33, 129}, {257, 129, 1031}, {3, 4, 0}, {0, 4, 3}, {5, 0, 2}} {
		M, N, K := d[0], d[1], d[2]
		t.Run(fmt.Sprintf("%dx%dx%d", M, N, K), func(t *testing.T) {
			a, b := randF32(r, M*K), randF32(r, K*N)
			got, want, s := make([]float64, M*N), make([]float64, M*N), make([]float64, M*N)
			for i := range got {
				got[i], want[i] = math.NaN(), math.NaN()
			}
			dgemm(M, N, K, widen(a), widen(b), got)
			dgemmGo(M, N, K, widen(a), widen(b), want)
			dgemmGo(M, N, K, absWiden(a), absWiden(b), s)
			differ, worst := 0, 0.0
			for i := range got {
				if K == 0 && (got[i] != 0 || want[i] != 0) {
					t.Fatalf("dgemm K=0: C[%d] = %v (this build), %v (gonum), want 0", i, got[i], want[i])
				}
				tol := dotTol(K, s[i])
				if !within(got[i], want[i], tol) {
					t.Fatalf("dgemm C[%d] = %v, gonum %v: |difference| %.3g exceeds dotTol %.3g (s = %v)", i, got[i], want[i], math.Abs(got[i]-want[i]), tol, s[i])
				}
				if !same(got[i], want[i]) {
					differ++
					worst = max(worst, math.Abs(got[i]-want[i])/tol)
				}
			}
			t.Logf("%s: %d of %d elements differ from gonum's in their bits; largest |difference|/tolerance %.3g", BLAS(), differ, M*N, worst)
		})
	}
}

// TestDgemmConcurrent: dgemm called from several goroutines at once (as
// capture --jobs does) gives what it gives alone.
func TestDgemmConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const M, N, K = 129, 65, 517
	a, b := widen(randF32(r, M*K)), widen(randF32(r, K*N))
	alone := make([]float64, M*N)
	dgemm(M, N, K, a, b, alone)
	var wg sync.WaitGroup
	got := make([][]float64, 6)
	for j := range got {
		got[j] = make([]float64, M*N)
		wg.Go(func() {
			for range 5 {
				dgemm(M, N, K, a, b, got[j])
			}
		})
	}
	wg.Wait()
	for j := range got {
		for i := range alone {
			if !same(got[j][i], alone[i]) {
				t.Fatalf("goroutine %d: C[%d] = %v, alone %v", j, i, got[j][i], alone[i])
			}
		}
	}
}

// TestBLASName: BLAS names OpenBLAS's configuration where cgo is on and
// gonum where it is off.
func TestBLASName(t *testing.T) {
	name := BLAS()
	if cgoBuild && !(strings.HasPrefix(name, "OpenBLAS ") && strings.HasSuffix(name, " (cgo)")) {
		t.Errorf("BLAS() = %q, want OpenBLAS's configuration and (cgo)", name)
	}
	if !cgoBuild && name != "gonum (pure Go)" {
		t.Errorf("BLAS() = %q, want gonum (pure Go)", name)
	}
	t.Log(name)
}

// packets returns the packet of c as the gonum build computes it and as
// this build does.
func packets(t *testing.T, c Case) (in []Tensor, gonum, native []Expected) {
	t.Helper()
	in, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	withGonum(func() { gonum, err = Reference(c, in) })
	if err != nil {
		t.Fatal(err)
	}
	if native, err = Reference(c, in); err != nil {
		t.Fatal(err)
	}
	return in, gonum, native
}

// bitsDiffer counts the float elements (values and bounds) whose bits
// differ between two packets.
func bitsDiffer(x, y []Expected) (want, bound int) {
	for k := range x {
		for i := range x[k].Want {
			if !same(x[k].Want[i], y[k].Want[i]) {
				want++
			}
			if !same(x[k].Bound[i], y[k].Bound[i]) {
				bound++
			}
		}
	}
	return want, bound
}

// TestSamePacketAcrossBLAS: a packet computed with gonum (the GPU
// machine's static build) passes SamePacket against this build's, and the
// other way round with gonum auditing, for every op of the gemm family,
// half storage, tf32, cancelling inputs, and dyadic inputs, where the
// bound is 0 and the packets are the same bits.
func TestSamePacketAcrossBLAS(t *testing.T) {
	mk := func(op, pattern string, dims map[string]int, mod func(*Case)) Case {
		c := testCase(op, pattern, 1, dims)
		if mod != nil {
			mod(&c)
		}
		return c
	}
	big := map[string]int{"M": 257, "N": 129, "K": 1031}
	mid := map[string]int{"M": 65, "N": 33, "K": 129}
	for _, c := range []Case{
		mk("gemm", "normal", big, nil),
		mk("gemm", "dyadic", big, nil),
		mk("gemm", "adversarial", mid, nil),
		mk("gemm_relu", "normal", mid, nil),
		mk("gemm_gelu", "normal", mid, nil),
		mk("bmm", "normal", map[string]int{"B": 3, "M": 33, "N": 17, "K": 129}, nil),
		mk("gemv", "normal", map[string]int{"M": 129, "K": 1031}, nil),
		mk("gemm", "normal", mid, func(c *Case) { c.Dtype = "bf16" }),
		mk("gemm_gelu", "normal", mid, func(c *Case) { c.Dtype = "f16" }),
		mk("gemm", "normal", mid, func(c *Case) { c.Policy = PolicyTF32 }),
		mk("gemm_relu", "dyadic", mid, nil),
	} {
		t.Run(c.ID+"-"+c.Dtype+"-"+c.Policy, func(t *testing.T) {
			in, gonum, native := packets(t, c)
			if err := SamePacket(c, in, gonum, native); err != nil {
				t.Errorf("SamePacket(gonum's packet) on %s: %v", BLAS(), err)
			}
			withGonum(func() {
				if err := SamePacket(c, in, native, gonum); err != nil {
					t.Errorf("SamePacket(%s's packet) on gonum: %v", BLAS(), err)
				}
			})
			dw, db := bitsDiffer(gonum, native)
			t.Logf("%d expected values and %d bounds of %d differ in their bits", dw, db, len(native[0].Want))
			if c.Pattern == "dyadic" && (dw != 0 || db != 0) {
				t.Errorf("dyadic %s: %d values and %d bounds differ between gonum and %s, want the same bits (exact in every order)", c.Op, dw, db, BLAS())
			}
			if c.Op == "gemm" && c.Pattern == "dyadic" {
				for i, b := range native[0].Bound {
					if b != 0 {
						t.Fatalf("dyadic gemm bound[%d] = %v, want 0", i, b)
					}
				}
			}
			if cgoBuild && c.ID == "gemm-257-129-1031-normal-1" && dw == 0 {
				t.Errorf("gonum and %s agree in every bit: the test shows nothing", BLAS())
			}
		})
	}
}

// TestSamePacketTampered: a packet moved by far less than the binary32
// bound but far more than the FP64 tolerance fails, with the element, both
// values, the tolerance and why; so does any bit of an exact element, of
// an op computed in pure Go and of an index output.
func TestSamePacketTampered(t *testing.T) {
	big := map[string]int{"M": 257, "N": 129, "K": 1031}
	gemm := testCase("gemm", "normal", 1, big)
	in, gonum, native := packets(t, gemm)

	// The largest |c|/s element: one binary32 ulp of it is what an
	// output of that magnitude would be off by.
	a, b := in[0].F, in[1].F
	s := make([]float64, 257*129)
	dgemm(257, 129, 1031, absWiden(a), absWiden(b), s)
	i := 0
	for j := range s {
		if math.Abs(native[0].Want[j])/s[j] > math.Abs(native[0].Want[i])/s[i] {
			i = j
		}
	}
	w := gonum[0].Want[i]
	ulp := math.Ldexp(1, math.Ilogb(w)-23)
	tol := dotTol(1031, s[i])
	if !(ulp < native[0].Bound[i]/100 && ulp > 1e4*tol) {
		t.Fatalf("element %d: ulp %.3g, bound %.3g, tolerance %.3g: not the attack this test means", i, ulp, native[0].Bound[i], tol)
	}

	dyadic := testCase("gemm", "dyadic", 1, big)
	dIn, dGonum, dNative := packets(t, dyadic)
	ds := make([]float64, 257*129)
	dgemm(257, 129, 1031, absWiden(dIn[0].F), absWiden(dIn[1].F), ds)

	relu := testCase("gemm_relu", "normal", 1, big)
	rIn, rGonum, rNative := packets(t, relu)
	rj := 0
	for rGonum[0].Bound[rj] == 0 {
		rj++
	}
	rs := make([]float64, 257*129)
	dgemm(257, 129, 1031, absWiden(rIn[0].F), absWiden(rIn[1].F), rs)
	rw, rbd := refGemm(257, 129, 1031, rIn[0].F, rIn[1].F, PolicyStrict)
	rz := epilogueInput(rw[rj], rbd[rj])
	rtz := 0.125*dotTol(1031, rs[rj]) + zEval*math.Abs(rz.v)
	rb := rGonum[0].Bound[rj] * (1 + 0x1p-30)

	softmax := testCase("softmax", "normal", 1, map[string]int{"M": 8, "N": 33})
	smIn, _, smNative := packets(t, softmax)
	argmax := testCase("argmax", "normal", 1, map[string]int{"M": 8, "N": 33})
	amIn, _, amNative := packets(t, argmax)

	clone := func(e []Expected) []Expected {
		out := make([]Expected, len(e))
		for k := range e {
			out[k] = Expected{Want: append([]float64(nil), e[k].Want...), Bound: append([]float64(nil), e[k].Bound...), WantI: append([]int64(nil), e[k].WantI...)}
			if e[k].WantI == nil {
				out[k].WantI = nil
			}
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		c          Case
		in         []Tensor
		stored, re []Expected
		tamper     func(e []Expected)
		want       string
	}{
		{"reference moved one binary32 ulp", gemm, in, gonum, native, func(e []Expected) { e[0].Want[i] += ulp },
			fmt.Sprintf("case %s expected C[%d] = %s, recomputed %s: |difference| %.3g exceeds %.3g (two FP64 evaluations of a 1031-term dot product differ by at most 2·γ_1031(2^-53)·s, s = %.6g)",
				gemm.ID, i, num(w+ulp), num(native[0].Want[i]), math.Abs(w+ulp-native[0].Want[i]), tol, s[i])},
		{"bound raised 2^-30", gemm, in, gonum, native, func(e []Expected) { e[0].Bound[i] *= 1 + 0x1p-30 },
			fmt.Sprintf("case %s bound C[%d] = %s, recomputed %s: |difference| %.3g exceeds %.3g (%.3g relative as s moves, plus 2^-7 times the reference's %.3g)",
				gemm.ID, i, num(gonum[0].Bound[i]*(1+0x1p-30)), num(native[0].Bound[i]), math.Abs(gonum[0].Bound[i]*(1+0x1p-30)-native[0].Bound[i]),
				boundRel(1031)*native[0].Bound[i]+refSlope*tol, boundRel(1031), tol)},
		{"exact element moved one grain", dyadic, dIn, dGonum, dNative, func(e []Expected) { e[0].Want[7] += 1.0 / 64 },
			fmt.Sprintf("case %s expected C[7] = %s, recomputed %s: must match bit for bit: exact in every summation order, s = %.6g < 2^47",
				dyadic.ID, num(dNative[0].Want[7]+1.0/64), num(dNative[0].Want[7]), ds[7])},
		{"exact bound raised from 0", dyadic, dIn, dGonum, dNative, func(e []Expected) { e[0].Bound[7] = 0x1p-40 },
			fmt.Sprintf("case %s bound C[7] = %s, recomputed 0: must match bit for bit: exact in every summation order, s = %.6g < 2^47",
				dyadic.ID, num(0x1p-40), ds[7])},
		{"relu bound raised 2^-30", relu, rIn, rGonum, rNative, func(e []Expected) { e[0].Bound[rj] = rb },
			fmt.Sprintf("case %s bound C[%d] = %s, recomputed %s: |difference| %.3g exceeds %.3g (%.3g relative as s moves, plus 2^-7 times z's move %.3g)",
				relu.ID, rj, num(rb), num(rNative[0].Bound[rj]), math.Abs(rb-rNative[0].Bound[rj]),
				boundRel(1031)*rNative[0].Bound[rj]+refSlope*rtz, boundRel(1031), rtz)},
		{"softmax one FP64 ulp", softmax, smIn, smNative, smNative, func(e []Expected) { e[0].Want[5] = math.Nextafter(e[0].Want[5], 2) },
			fmt.Sprintf("case %s expected Y[5] = %s, recomputed %s: must match bit for bit (softmax is computed in pure Go, the same on every build)",
				softmax.ID, num(math.Nextafter(smNative[0].Want[5], 2)), num(smNative[0].Want[5]))},
		{"softmax bound one FP64 ulp", softmax, smIn, smNative, smNative, func(e []Expected) { e[0].Bound[5] = math.Nextafter(e[0].Bound[5], 2) },
			fmt.Sprintf("case %s bound Y[5] = %s, recomputed %s: must match bit for bit (softmax is computed in pure Go, the same on every build)",
				softmax.ID, num(math.Nextafter(smNative[0].Bound[5], 2)), num(smNative[0].Bound[5]))},
		{"argmax index", argmax, amIn, amNative, amNative, func(e []Expected) { e[1].WantI[2] = (e[1].WantI[2] + 1) % 33 },
			fmt.Sprintf("case %s expected I[2] = %d, recomputed %d: an index output must match exactly",
				argmax.ID, (amNative[1].WantI[2]+1)%33, amNative[1].WantI[2])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := clone(tc.stored)
			tc.tamper(stored)
			err := SamePacket(tc.c, tc.in, stored, tc.re)
			if err == nil {
				t.Fatalf("SamePacket(%s) = nil, want %s", tc.name, tc.want)
			}
			t.Log(err)
			if err.Error() != tc.want {
				t.Errorf("SamePacket(%s) =\n%v\nwant\n%s", tc.name, err, tc.want)
			}
		})
	}
}

// TestEpilogueInput: epilogueInput and epilogueOut are refGemmAct's and
// Reference's computation, bit for bit, so the tolerance of an epilogue
// starts from the z the oracle used.
func TestEpilogueInput(t *testing.T) {
	for _, dtype := range []string{"f32", "bf16", "f16"} {
		for _, op := range []string{"gemm_relu", "gemm_gelu"} {
			c := testCase(op, "normal", 2, map[string]int{"M": 33, "N": 17, "K": 65})
			c.Dtype = dtype
			in, err := Generate(c)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := Reference(c, in)
			if err != nil {
				t.Fatal(err)
			}
			w, bd := refGemm(33, 17, 65, in[0].F, in[1].F, c.Policy)
			for i := range w {
				y, b := epilogueOut(op, dtype, epilogueInput(w[i], bd[i]))
				if !same(y, exp[0].Want[i]) || !same(b, exp[0].Bound[i]) {
					t.Fatalf("%s %s element %d: epilogueOut = %v ± %v, Reference %v ± %v", op, dtype, i, y, b, exp[0].Want[i], exp[0].Bound[i])
				}
			}
		}
	}
}

// TestSamePacketEpilogues drives a gemm element's reference c and its s to
// the corners of what another FP64 evaluation may give (c ± 2γ_K·s, s
// scaled by 1 ± 2γ_K), recomputes the bound and the epilogue there, and
// checks that SamePacket's element check accepts every corner: over K up
// to MaxDim, strict and tf32, f32 and half storage, c/s from -1 to 1, and
// the places where the epilogues bend (gelu's minimum at z ≈ -0.75, z = 0,
// relu's edge where z + e_z crosses 0). It reports the largest share of
// each tolerance used, which docs/oracle.md quotes.
func TestSamePacketEpilogues(t *testing.T) {
	type key struct{ op, what string }
	worst := map[key]float64{}
	n, flips := 0, 0
	for _, K := range []int{1, 7, 129, 1031, MaxDim} {
		g2 := 2 * gamma64(K)
		for _, policy := range []string{PolicyStrict, PolicyTF32} {
			bound := func(s, y float64) float64 {
				if policy == PolicyTF32 {
					return tf32DotBound(s, K)
				}
				return dotBound(s, y, K, true, -1)
			}
			for _, dtype := range []string{"f32", "bf16", "f16"} {
				if policy == PolicyTF32 && dtype != "f32" {
					continue
				}
				for _, s := range []float64{1e-3, 0.1, 1, 9, 100, 1e4, 1e6} {
					var ys []float64
					for _, r := range []float64{-1, -0.5, -0.1, -0.01, 0, 0.01, 0.1, 0.5, 1} {
						ys = append(ys, r*s)
					}
					ys = append(ys, -8.0144, -2, -2.0000001) // gelu's minimum, z = 0
					// relu's edge: z.v + z.e = 0, by bisection on c.
					edge := func(y float64) float64 { z := epilogueInput(y, bound(s, y)); return z.v + z.e }
					lo, hi := -2-8*bound(s, s)-1, -2.0
					for range 200 {
						mid := (lo + hi) / 2
						if edge(mid) < 0 {
							lo = mid
						} else {
							hi = mid
						}
					}
					ys = append(ys, lo, hi)
					for _, y := range ys {
						if math.Abs(y) > s {
							continue
						}
						for _, op := range []string{"gemm", "gemm_relu", "gemm_gelu"} {
							z := epilogueInput(y, bound(s, y))
							g := &gemmSpread{op: op, dtype: dtype, K: K, s: []float64{s}, exactExp: []int{-2000}, z: []ev{z}}
							rw, rb := y, storeBound(dtype, y, bound(s, y))
							if op != "gemm" {
								rw, rb = epilogueOut(op, dtype, z)
							}
							for _, ds := range []float64{-1, 0, 1} {
								for _, dy := range []float64{-1, 0, 1} {
									// The farthest float64 values within the move.
									s2, y2 := s*(1+ds*g2), y+dy*g2*s
									for math.Abs(s2-s) > g2*s {
										s2 = math.Nextafter(s2, s)
									}
									for math.Abs(y2-y) > g2*s {
										y2 = math.Nextafter(y2, y)
									}
									sw, sb := y2, storeBound(dtype, y2, bound(s2, y2))
									if op != "gemm" {
										sw, sb = epilogueOut(op, dtype, epilogueInput(y2, bound(s2, y2)))
									}
									n++
									if e := g.check(0, sw, sb, rw, rb); e != nil {
										e.Output = "C"
										t.Fatalf("K=%d %s %s s=%g c=%g, corner (%g, %g): %s", K, policy, dtype, s, y, ds, dy, e.Detail())
									}
									if e := g.check(0, sw+1, sb, rw, rb); e == nil {
										t.Fatalf("K=%d %s %s s=%g c=%g: a reference moved by 1 passes", K, policy, dtype, s, y)
									}
									if e := g.check(0, rw, rb*(1+0x1p-16)+0x1p-100, rw, rb); e == nil {
										t.Fatalf("K=%d %s %s s=%g c=%g: a bound moved by 2^-16 passes", K, policy, dtype, s, y)
									}
									if op == "gemm_relu" && (rb == 0) != (sb == 0) {
										flips++
									}
									// What share of each tolerance the corner used.
									tol := g.tol(0, rb)
									if d := math.Abs(sw - rw); d > 0 {
										worst[key{op, "expected"}] = max(worst[key{op, "expected"}], d/tol.want)
									}
									if d := math.Abs(sb - rb); d > 0 && tol.bound > 0 && d <= tol.bound {
										worst[key{op, "bound"}] = max(worst[key{op, "bound"}], d/tol.bound)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	for _, op := range []string{"gemm", "gemm_relu", "gemm_gelu"} {
		t.Logf("%s: largest share of the tolerance used: expected %.3g, bound %.3g", op, worst[key{op, "expected"}], worst[key{op, "bound"}])
	}
	t.Logf("%d corners, %d of them across relu's edge", n, flips)
	if flips == 0 {
		t.Error("no corner crossed relu's edge: the edge case is not tested")
	}
}
