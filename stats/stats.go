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
// route/baseline time: below 1 the route is faster. [Ratios] reports the
// median of the per-round ratios, their range, and a percentile bootstrap
// interval of that median from a fixed seed, so a reviewer recomputing it
// gets the same numbers.
package stats

import (
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
	Lo, Hi float64 // bootstrap interval of the median
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
	case r.N < 2:
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
