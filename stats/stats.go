// Package stats summarizes timing samples: order statistics of per-op times
// and paired ratios against a baseline with a seeded bootstrap interval.
//
// # Summary
//
// A [Summary] of per-op times is the median, minimum, maximum and the
// quartiles (linear interpolation between order statistics, R type 7).
//
// # Paired ratio
//
// Replay visits every route once per case and round, so each round yields
// one pair (route median, baseline median). The ratio of a round is
// route/baseline time: below 1 the route is faster. [SignRatios] reports
// the median of the per-round ratios, their range, and an exact,
// distribution-free interval of the true median ratio: order statistics
// chosen by the sign test, which covers the median at least at the stated
// level for any continuous distribution of independent rounds, at any
// number of rounds. Below [MinPairs] rounds no such interval exists at
// 95%, and the verdict is "too few rounds". [Ratios], the percentile
// bootstrap of the median that replays used before, is kept to recompute
// their summaries: at 4 rounds it called identical binaries different one
// time in eight (docs/statistics.md).
package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Summary is the order statistics of a sample.
type Summary struct {
	N      int
	Median float64
	Min    float64
	Max    float64
	Q1     float64
	Q3     float64
}

// Quantile is the q-quantile of sorted xs (R type 7); NaN when empty.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	h := q * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Summarize computes the summary of xs without modifying it.
func Summarize(xs []float64) Summary {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		nan := math.NaN()
		return Summary{Median: nan, Min: nan, Max: nan, Q1: nan, Q3: nan}
	}
	return Summary{N: len(s), Median: Quantile(s, 0.5), Min: s[0], Max: s[len(s)-1], Q1: Quantile(s, 0.25), Q3: Quantile(s, 0.75)}
}

// Median of xs.
func Median(xs []float64) float64 { return Summarize(xs).Median }

// Ratio is the paired-ratio summary of per-round ratios.
type Ratio struct {
	N      int
	Median float64
	Min    float64
	Max    float64
	Lo, Hi float64 // interval of the median
	// Exact: the interval is SignRatios' (order statistics by the sign
	// test), with Coverage its exact coverage (0: too few ratios for one);
	// otherwise it is Ratios' percentile bootstrap.
	Exact    bool
	Coverage float64
}

// Verdict words for a ratio interval.
const (
	Faster       = "faster"
	Slower       = "slower"
	NoDifference = "no difference shown"
	TooFew       = "too few rounds"
)

// Verdict classifies a ratio by its interval: an interval that contains 1
// shows no difference.
func (r Ratio) Verdict() string {
	switch {
	case r.N < 2, r.Exact && r.Coverage == 0:
		return TooFew
	case r.Hi < 1:
		return Faster
	case r.Lo > 1:
		return Slower
	}
	return NoDifference
}

// Ratios summarizes per-round ratios with a percentile bootstrap interval
// (level, e.g. 0.95) of their median from resamples draws seeded by seed.
func Ratios(ratios []float64, level float64, resamples int, seed uint64) Ratio {
	s := Summarize(ratios)
	r := Ratio{N: s.N, Median: s.Median, Min: s.Min, Max: s.Max, Lo: s.Min, Hi: s.Max}
	if s.N < 2 || resamples < 1 {
		return r
	}
	rng := rand.New(rand.NewPCG(seed, 0x7469_6c65_7069_7065)) // "tilepipe"
	meds := make([]float64, resamples)
	buf := make([]float64, len(ratios))
	for i := range meds {
		for j := range buf {
			buf[j] = ratios[rng.IntN(len(ratios))]
		}
		sort.Float64s(buf)
		meds[i] = Quantile(buf, 0.5)
	}
	sort.Float64s(meds)
	alpha := (1 - level) / 2
	r.Lo, r.Hi = Quantile(meds, alpha), Quantile(meds, 1-alpha)
	return r
}

// SignInterval is the exact distribution-free interval of the median of n
// independent draws from a continuous distribution, inverted from the
// sign test: the k-th smallest and k-th largest of the draws, k the
// largest with 2·P(Bin(n, 1/2) <= k-1) <= 1-level. Its coverage, 1 -
// 2·P(Bin(n, 1/2) <= k-1), is at least level (ties only widen it). k is 0
// when n is too small for any such interval (n < MinPairs(level)).
func SignInterval(n int, level float64) (k int, coverage float64) {
	cdf, p := 0.0, math.Pow(0.5, float64(n)) // P(X = 0)
	for j := 0; j <= n/2; j++ {
		cdf += p // P(X <= j)
		if 2*cdf > 1-level {
			break
		}
		k, coverage = j+1, 1-2*cdf
		p = p * float64(n-j) / float64(j+1) // P(X = j+1)
	}
	return k, coverage
}

// MinPairs is the fewest rounds whose ratios give an exact interval at
// level: 6 at 95% (the extremes of 6 cover with probability 1 - 2/64).
func MinPairs(level float64) int {
	n := 1
	for k, _ := SignInterval(n, level); k == 0; k, _ = SignInterval(n, level) {
		n++
	}
	return n
}

// SignRatios summarizes per-round ratios with the exact interval of their
// median (SignInterval); Lo and Hi are the order statistics, Coverage
// their exact coverage. With fewer than MinPairs(level) ratios there is
// no interval: Lo and Hi are the range, Coverage 0, the verdict "too few
// rounds".
func SignRatios(ratios []float64, level float64) Ratio {
	s := Summarize(ratios)
	r := Ratio{N: s.N, Median: s.Median, Min: s.Min, Max: s.Max, Lo: s.Min, Hi: s.Max, Exact: true}
	k, cov := SignInterval(s.N, level)
	if k == 0 {
		return r
	}
	xs := append([]float64(nil), ratios...)
	sort.Float64s(xs)
	r.Lo, r.Hi, r.Coverage = xs[k-1], xs[s.N-k], cov
	return r
}

// Interval methods (artifacts.ReplayConfig.Interval): "sign", and ""
// for the bootstrap of replays made before it.
const (
	IntervalSign      = "sign"
	IntervalBootstrap = ""
)

// PairedRatios summarizes per-round ratios at level by the named method:
// SignRatios, or Ratios' bootstrap (resamples, seed) for "".
func PairedRatios(method string, level float64, ratios []float64, resamples int, seed uint64) (Ratio, error) {
	switch method {
	case IntervalSign:
		return SignRatios(ratios, level), nil
	case IntervalBootstrap:
		return Ratios(ratios, level, resamples, seed), nil
	}
	return Ratio{}, fmt.Errorf("interval %q: want %q (or absent: the bootstrap of replays made before it)", method, IntervalSign)
}
