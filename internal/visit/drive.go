package visit

import (
	"fmt"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"time"

	"github.com/tilepipe/tilepipe/stats"
)

// Plan is how replay drives one visit (docs/protocol.md, "visit").
type Plan struct {
	Warmup   time.Duration
	Sample   time.Duration // calibration target of one batch sample
	Samples  int           // batch samples, and as many empty samples
	Singles  int
	MaxCalls int64
	// Clock is the span that is each sample's time (samples.ClockReplay
	// or samples.ClockCUDA); calibration and warm-up always use replay's.
	Clock string
	// Pin: before the warm-up, pin every thread of the visit to one core
	// of its mask ([Session.Pins] reads them back).
	Pin bool
}

// Sample kinds.
const (
	KindBatch  = "batch"
	KindSingle = "single"
	KindEmpty  = "empty" // no calls: the channel's own overhead
	KindFresh  = "fresh" // one call on each of N fresh sets
	// KindControl is a warm sample of as many calls as the fresh sample
	// that follows it (same Index): whatever a sample of that size costs
	// beyond its calls (the channel, waking the timer's threads) cancels.
	KindControl = "control"
)

// FreshTarget is the work each fresh sample aims at: as many fresh calls
// as the batch samples' median call time fits into it (at least one, at
// most what the fresh sets allow).
const FreshTarget = 2 * time.Millisecond

// FreshSamples is how many fresh samples a visit takes (fewer where there
// are fewer fresh sets): one sample can be preempted, so the bound uses
// the fastest.
const FreshSamples = 3

// FreshBound and ColdSlack bound an honest fresh call: at most FreshBound
// warm calls plus ColdSlack times the time the replay machine's memory
// takes to deliver the set's bytes (docs/results/2026-11-30-fresh-ratio).
const (
	FreshBound = 6.0
	ColdSlack  = 8.0
)

// ColdFixed is what a call on a set nobody touched yet pays whatever its
// size, which no bandwidth measures: page-table walks and the first lines'
// latency. Without it the bound of the smallest cases (add 3x7: 158 ns
// warm, 1.3 us fresh under a parallel make test) failed honest visits.
const ColdFixed = 2 * time.Microsecond

// ColdAllowance is the part of the bound for fetching a set of bytes
// bytes on a machine whose cold bandwidth is bw bytes per second:
// ColdFixed plus ColdSlack times the transfer time.
func ColdAllowance(bytes int, bw float64) float64 {
	if bw <= 0 {
		return float64(ColdFixed.Nanoseconds())
	}
	return float64(ColdFixed.Nanoseconds()) + ColdSlack*float64(bytes)/bw*1e9
}

// FreshPlan is the calls of each fresh sample, given the warm samples and
// the fresh sets there are: FreshSamples samples where the sets allow,
// each as many calls as fit in FreshTarget.
func FreshPlan(ss []Sample, sets int) []int64 {
	k := min(FreshSamples, sets)
	n := int64(sets / k)
	if per := warmPerCall(ss); per > 0 {
		n = min(n, int64(float64(FreshTarget)/per)+1)
	}
	plan := make([]int64, k)
	for i := range plan {
		plan[i] = max(n, 1)
	}
	return plan
}

// warmPerCall is the batch samples' median span over their calls (the
// channel's round trip, a few tens of microseconds, is part of it, as it
// is of every summary).
func warmPerCall(ss []Sample) float64 {
	var batch []float64
	var calls int64
	for _, s := range ss {
		if s.Kind == KindBatch {
			batch, calls = append(batch, float64(s.Ns())), s.Calls
		}
	}
	if len(batch) == 0 || calls == 0 {
		return 0
	}
	return stats.Median(batch) / float64(calls)
}

// Sample is one span measured by replay, with the timer's own number.
type Sample struct {
	Kind    string
	Index   int
	Calls   int64
	SpanNs  int64
	TimerNs int64
	Clock   string // which of the two is the sample's time (samples.Clock*)
	Tel     Telemetry
}

// Ns is the sample's time: the span its clock names.
func (s Sample) Ns() int64 {
	if s.Clock == samples.ClockCUDA {
		return s.TimerNs
	}
	return s.SpanNs
}

// CheckClock is the per-sample side of the clock cross-check: the timer's
// own measurement lies inside replay's span, so it may not exceed it by
// more than ClockAhead (two clock reads on two CPUs).
func CheckClock(s Sample) error {
	if s.TimerNs < 0 || s.TimerNs > s.SpanNs+int64(ClockAhead) {
		return fail("clock_mismatch: %s sample %d (%d calls): replay measured %d ns, the timer reported %d ns, more than replay's span",
			s.Kind, s.Index, s.Calls, s.SpanNs, s.TimerNs)
	}
	return nil
}

// CheckGap is the other side, over a visit's batch samples: the smallest
// (span - timer) may not exceed ClockBase + ClockFrac of the median span.
// The smallest, because a loaded machine delays answers by milliseconds,
// often sample after sample (two honest visits failed on the median under
// a parallel make test); a timer that reports less than it spent does so
// every time, so its smallest gap is as large as any.
func CheckGap(ss []Sample) error {
	var spans []float64
	gap := 0.0
	for _, s := range ss {
		if s.Kind == KindBatch {
			g := float64(s.SpanNs - s.TimerNs)
			if len(spans) == 0 || g < gap {
				gap = g
			}
			spans = append(spans, float64(s.SpanNs))
		}
	}
	if len(spans) == 0 {
		return nil
	}
	span := stats.Median(spans)
	if allowed := float64(ClockBase) + ClockFrac*span; gap > allowed {
		return fail("clock_mismatch: batch samples: replay measured a median span of %.0f ns, the timer reported at least %.0f ns less in every one (allowed: %.0f ns)", span, gap, allowed)
	}
	return nil
}

// Fresh is a visit's fresh samples against its warm ones: time per call
// of each and the bound.
type Fresh struct {
	FreshNs, WarmNs, BoundNs float64
}

// FreshStats computes [Fresh] from a visit's samples. Each fresh sample
// follows a control: a warm sample of as many calls, so what a sample of
// that size costs beyond its calls cancels. The fresh time per call is the
// warm time per call plus the median, over the pairs, of the fresh
// sample's excess over its control per call.
func FreshStats(ss []Sample, coldNs float64) (Fresh, error) {
	control := map[int]Sample{}
	for _, s := range ss {
		if s.Kind == KindControl {
			control[s.Index] = s
		}
	}
	var excess []float64
	for _, s := range ss {
		if s.Kind != KindFresh {
			continue
		}
		c, ok := control[s.Index]
		if !ok || c.Calls != s.Calls || s.Calls < 1 {
			return Fresh{}, fmt.Errorf("drive: fresh sample %d (%d calls) has no control of as many calls", s.Index, s.Calls)
		}
		excess = append(excess, float64(s.Ns()-c.Ns())/float64(s.Calls))
	}
	if len(excess) == 0 {
		return Fresh{}, fmt.Errorf("drive: no fresh sample")
	}
	f := Fresh{WarmNs: warmPerCall(ss)}
	if f.WarmNs <= 0 {
		f.WarmNs = 1 // below the clock: any measurable fresh call is far slower
	}
	f.FreshNs = max(f.WarmNs+stats.Median(excess), 0)
	f.BoundNs = FreshBound*f.WarmNs + coldNs
	return f, nil
}

// CheckFresh compares the fresh time per call with the warm one: a kernel
// that is far faster on sets it has seen than on sets it has not, by more
// than fetching a set from memory explains (coldNs, [ColdAllowance]),
// remembers answers or computes only part of them.
func CheckFresh(ss []Sample, coldNs float64) error {
	f, err := FreshStats(ss, coldNs)
	if err != nil {
		return err
	}
	if f.FreshNs > f.BoundNs {
		return fail("memoisation_suspected: fresh calls took %.0f ns each, warm calls %.0f ns (ratio %.1f; bound %.0f ns = %.0f x warm + %.0f ns to fetch the set from memory)",
			f.FreshNs, f.WarmNs, f.FreshNs/f.WarmNs, f.BoundNs, FreshBound, coldNs)
	}
	return nil
}

// Drive pins the visit's threads one to a core (p.Pin), warms the timer
// up, calibrates the calls per sample on replay's clock, and takes the
// empty, batch and single samples. It returns the calls per batch sample.
func (s *Session) Drive(p Plan) ([]Sample, int64, error) {
	clock := p.Clock
	if clock == "" {
		clock = samples.ClockReplay
	}
	take := func(kind string, i int, n int64) (Sample, error) {
		span, tn, err := s.Sample(n)
		if err != nil {
			return Sample{}, err
		}
		smp := Sample{Kind: kind, Index: i, Calls: n, SpanNs: span.Nanoseconds(), TimerNs: tn, Clock: clock, Tel: s.LastTelemetry()}
		if n == 0 {
			smp.Clock = samples.ClockReplay // the channel alone: no launch to time
		}
		return smp, CheckClock(smp)
	}
	// The validation calls have made the kernel's thread pools: pin them
	// before the warm-up, which then warms the cores the samples use.
	if p.Pin {
		if err := s.pinThreads(); err != nil {
			return nil, 0, err
		}
	}
	// Warm-up: doubling batches until the warm-up time has passed.
	start := time.Now()
	for n := int64(1); time.Since(start) < p.Warmup; n = min(2*n, p.MaxCalls) {
		if _, err := take("warmup", 0, n); err != nil {
			return nil, 0, err
		}
	}
	n, err := CalibrateCalls(func(n int64) (time.Duration, error) {
		smp, err := take("calibration", 0, n)
		return time.Duration(smp.SpanNs), err
	}, p.Sample, p.MaxCalls)
	if err != nil {
		return nil, 0, err
	}
	var out []Sample
	for _, k := range []struct {
		kind  string
		count int
		calls int64
	}{{KindEmpty, p.Samples, 0}, {KindBatch, p.Samples, n}, {KindSingle, p.Singles, 1}} {
		for i := 0; i < k.count; i++ {
			smp, err := take(k.kind, i, k.calls)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, smp)
		}
	}
	if len(out) != 2*p.Samples+p.Singles {
		return nil, 0, fmt.Errorf("drive: %d samples, want %d", len(out), 2*p.Samples+p.Singles)
	}
	return out, n, CheckGap(out)
}

// JumpFactor is how much longer than the one before it a calibration
// sample may be before calibration takes it again: doubling the calls
// doubles an honest span, and a sample preempted for a millisecond jumps.
const JumpFactor = 4

// CalibrateCalls doubles the calls of a calibration sample (take) from 1 until
// one lasts target, or the calls reach maxCalls, and returns those calls.
// A sample that reaches target after a jump of more than JumpFactor over
// the one before it (or the first, one call) is taken once more, and ends calibration only if the
// retake lasts target/2 too: otherwise one preemption of a few calls'
// sample would fix the calls per sample at a handful, and every batch
// sample of the visit would be mostly the channel's round trip (seen on
// this project's 2-core machine: 2 calls of a 25 ns add, 18 µs per call).
func CalibrateCalls(take func(n int64) (time.Duration, error), target time.Duration, maxCalls int64) (int64, error) {
	var prev time.Duration
	for n := int64(1); ; n = min(2*n, maxCalls) {
		span, err := take(n)
		if err != nil {
			return 0, err
		}
		if n >= maxCalls {
			return n, nil
		}
		if span >= target {
			if prev > 0 && span <= JumpFactor*prev {
				return n, nil
			}
			again, err := take(n)
			if err != nil {
				return 0, err
			}
			if again >= target/2 {
				return n, nil
			}
			span = again
		}
		prev = span
	}
}
