package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.5, 2.5}, {0.25, 1.75}, {1, 4}} {
		if got := Quantile(s, tc.q); got != tc.want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", s, tc.q, got, tc.want)
		}
	}
	if got := Quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Quantile(nil, 0.5) = %v, want NaN", got)
	}
}

func TestRatiosVerdict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratios []float64
		want   string
	}{
		{"faster", []float64{0.70, 0.72, 0.69, 0.71, 0.70, 0.73}, Faster},
		{"slower", []float64{1.30, 1.28, 1.31, 1.29, 1.35, 1.30}, Slower},
		{"straddles", []float64{0.8, 1.2, 0.9, 1.1, 1.0, 1.05}, NoDifference},
		{"one round", []float64{0.5}, TooFew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Ratios(tc.ratios, 0.95, 2000, 1)
			if got := r.Verdict(); got != tc.want {
				t.Errorf("Ratios(%v).Verdict() = %q (lo %v hi %v), want %q", tc.ratios, got, r.Lo, r.Hi, tc.want)
			}
		})
	}
}

func TestRatiosDeterministic(t *testing.T) {
	xs := []float64{0.9, 1.1, 0.95, 1.2, 0.85, 1.0}
	a, b := Ratios(xs, 0.95, 1000, 7), Ratios(xs, 0.95, 1000, 7)
	if a != b {
		t.Errorf("Ratios(seed 7) twice = %+v and %+v, want equal", a, b)
	}
	if a.Lo < a.Min || a.Hi > a.Max || a.Lo > a.Median || a.Hi < a.Median {
		t.Errorf("Ratios(%v) = %+v, want Min <= Lo <= Median <= Hi <= Max", xs, a)
	}
}

// binomTail is P(Bin(n, 1/2) <= j), summed from log-gamma terms: an
// implementation independent of SignInterval's recurrence.
func binomTail(n, j int) float64 {
	s := 0.0
	for i := 0; i <= j; i++ {
		a, _ := math.Lgamma(float64(n + 1))
		b, _ := math.Lgamma(float64(i + 1))
		c, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(a - b - c - float64(n)*math.Ln2)
	}
	return s
}

func TestSignInterval(t *testing.T) {
	for _, tc := range []struct {
		n     int
		level float64
		k     int
		cov   float64
	}{
		{1, 0.95, 0, 0}, {5, 0.95, 0, 0},
		{6, 0.95, 1, 1 - 2.0/64}, {8, 0.95, 1, 1 - 2.0/256}, {9, 0.95, 2, 1 - 20.0/512},
		{20, 0.95, 6, 1 - 2*binomTail(20, 5)},
		{7, 0.99, 0, 0}, {8, 0.99, 1, 1 - 2.0/256},
	} {
		k, cov := SignInterval(tc.n, tc.level)
		if k != tc.k || math.Abs(cov-tc.cov) > 1e-12 {
			t.Errorf("SignInterval(%d, %v) = %d, %v; want %d, %v", tc.n, tc.level, k, cov, tc.k, tc.cov)
		}
	}
	// Every n: k is the largest whose tails stay within 1-level.
	for n := 1; n <= 200; n++ {
		k, cov := SignInterval(n, 0.95)
		if k > 0 && (2*binomTail(n, k-1) > 0.05+1e-12 || math.Abs(cov-(1-2*binomTail(n, k-1))) > 1e-9) {
			t.Fatalf("n=%d: k=%d coverage %v: the tails are %v", n, k, cov, 2*binomTail(n, k-1))
		}
		if 2*(k+1) <= n && 2*binomTail(n, k) <= 0.05-1e-12 {
			t.Fatalf("n=%d: k=%d, but k+1 also covers (tails %v)", n, k, 2*binomTail(n, k))
		}
	}
	if got := MinPairs(0.95); got != 6 {
		t.Errorf("MinPairs(0.95) = %d, want 6", got)
	}
	if got := MinPairs(0.99); got != 8 {
		t.Errorf("MinPairs(0.99) = %d, want 8", got)
	}
}

func TestSignRatiosVerdict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratios []float64
		want   string
		lo, hi float64
	}{
		{"faster", []float64{0.70, 0.72, 0.69, 0.71, 0.70, 0.73}, Faster, 0.69, 0.73},
		{"slower", []float64{1.30, 1.28, 1.31, 1.29, 1.35, 1.30}, Slower, 1.28, 1.35},
		{"straddles", []float64{0.8, 1.2, 0.9, 1.1, 1.0, 1.05}, NoDifference, 0.8, 1.2},
		{"one on the other side", []float64{0.70, 0.72, 0.69, 0.71, 0.70, 1.01}, NoDifference, 0.69, 1.01},
		{"five rounds all faster", []float64{0.5, 0.5, 0.5, 0.5, 0.5}, TooFew, 0.5, 0.5},
		{"nine rounds: second from each end", []float64{0.1, 0.8, 0.81, 0.82, 0.83, 0.84, 0.85, 0.86, 1.9}, Faster, 0.8, 0.86},
	} {
		r := SignRatios(tc.ratios, 0.95)
		if got := r.Verdict(); got != tc.want || r.Lo != tc.lo || r.Hi != tc.hi {
			t.Errorf("%s: SignRatios(%v) = %q [%v, %v], want %q [%v, %v]", tc.name, tc.ratios, got, r.Lo, r.Hi, tc.want, tc.lo, tc.hi)
		}
	}
}

// TestFalseVerdicts: identical binaries (per-round ratios whose true median
// is 1) are called faster or slower at most at the nominal rate by the
// exact interval, at every number of rounds, for noise that is normal,
// heavy-tailed, skewed in time, or quantised to a clock tick (ties at 1);
// for continuous noise the rate is its exact 1 - coverage. The bootstrap
// that replays used before exceeds it at 4 rounds (the A/A run of issue
// 12: about one time in eight). Deterministic: seeded draws.
func TestFalseVerdicts(t *testing.T) {
	const trials = 20000
	rng := rand.New(rand.NewPCG(12, 12))
	nulls := []struct {
		name       string
		continuous bool
		ratio      func() float64
	}{
		{"lognormal 5%", true, func() float64 { return math.Exp(0.05 * rng.NormFloat64()) }},
		{"heavy tails (Cauchy log)", true, func() float64 { return math.Exp(0.02 * math.Tan(math.Pi*(rng.Float64()-0.5))) }},
		{"skewed times a/b", true, func() float64 {
			a, b := 1+rng.ExpFloat64()*0.3, 1+rng.ExpFloat64()*0.3
			return a / b
		}},
		{"quantised to 32 ms ticks", false, func() float64 {
			tick := func() float64 { return 32 * math.Ceil((30+4*rng.Float64())/32) }
			return tick() / tick()
		}},
	}
	se := math.Sqrt(0.05 * 0.95 / trials)
	for _, nl := range nulls {
		for _, n := range []int{6, 7, 9, 12, 20, 40} {
			wrong := 0
			xs := make([]float64, n)
			for range trials {
				for i := range xs {
					xs[i] = nl.ratio()
				}
				if SignRatios(xs, 0.95).Verdict() != NoDifference {
					wrong++
				}
			}
			rate := float64(wrong) / trials
			_, cov := SignInterval(n, 0.95)
			t.Logf("%-26s %2d rounds: called different %.4f (1 - coverage %.4f)", nl.name, n, rate, 1-cov)
			if rate > 0.05+3*se || nl.continuous && math.Abs(rate-(1-cov)) > 4*math.Sqrt((1-cov)*cov/trials) {
				t.Errorf("%s, %d rounds: %.4f of A/A runs called different, want at most 0.05 (exactly %.4f for continuous noise)", nl.name, n, rate, 1-cov)
			}
		}
	}
	wrong := 0
	const bootTrials = 4000
	for i := range bootTrials {
		xs := []float64{nulls[0].ratio(), nulls[0].ratio(), nulls[0].ratio(), nulls[0].ratio()}
		if Ratios(xs, 0.95, 400, uint64(i)).Verdict() != NoDifference {
			wrong++
		}
	}
	t.Logf("bootstrap (the old interval), lognormal 5%%, 4 rounds: called different %.4f", float64(wrong)/bootTrials)
	if rate := float64(wrong) / bootTrials; rate < 0.1 {
		t.Errorf("bootstrap at 4 rounds: %.3f of A/A runs called different; the defect this interval replaces was 1/8", rate)
	}
}
