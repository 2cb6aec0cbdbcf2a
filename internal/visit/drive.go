package visit

import (
	"fmt"
	"slices"
	"time"

	"github.com/tilepipe/tilepipe/artifacts/samples"
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

// CheckGap is the other side, over a visit's batch samples: the gap
// (span - timer) may not exceed what the channel explains.
//
// Where the batch samples' time is the timer's (samples.ClockCUDA, a GPU
// visit), the channel is measured and the median gap is bounded: by
// GapFactor × the visit's slowest empty sample (the round trip of a
// sample with no calls) + GapBase, at most GapMax, whatever the empty
// samples took. The median, so that a timer that shaves its number must
// leave more than half its samples honest, and one late answer still
// passes.
//
// Where it is replay's own span (every CPU visit), the timer's number
// never enters a result and the check only cross-checks the timer: the
// smallest gap may not exceed ClockBase + ClockFrac of the median span.
// The smallest, because a loaded machine delays answers by milliseconds,
// often sample after sample (two honest visits failed on the median
// under a parallel make test, and an honest torch-eager timer's answers
// wait 4-5 ms on a loaded 2-core machine: docs/threat-model.md, "Clock
// cross-check").
func CheckGap(ss []Sample) error {
	var spans, gaps []float64
	empty, events := 0.0, false
	for _, s := range ss {
		switch s.Kind {
		case samples.KindBatch:
			gaps = append(gaps, float64(s.SpanNs-s.TimerNs))
			spans = append(spans, float64(s.SpanNs))
			events = events || s.Clock == samples.ClockCUDA
		case samples.KindEmpty:
			empty = max(empty, float64(s.SpanNs))
		}
	}
	if len(spans) == 0 {
		return nil
	}
	span := stats.Median(spans)
	if events {
		if gap, allowed := stats.Median(gaps), min(GapFactor*empty+float64(GapBase), float64(GapMax)); gap > allowed {
			return fail("clock_mismatch: batch samples: replay measured a median span of %.0f ns, the CUDA events a median %.0f ns less (allowed: %.0f ns, %d x the slowest empty sample's %.0f ns + %d ns, at most %d ns)",
				span, gap, allowed, GapFactor, empty, GapBase.Nanoseconds(), GapMax.Nanoseconds())
		}
		return nil
	}
	if gap, allowed := slices.Min(gaps), float64(ClockBase)+ClockFrac*span; gap > allowed {
		return fail("clock_mismatch: batch samples: replay measured a median span of %.0f ns, the timer reported at least %.0f ns less in every one (allowed: %.0f ns)", span, gap, allowed)
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
	}{{samples.KindEmpty, p.Samples, 0}, {samples.KindBatch, p.Samples, n}, {samples.KindSingle, p.Singles, 1}} {
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
