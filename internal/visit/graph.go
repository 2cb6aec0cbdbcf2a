package visit

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// The methodology's graph timing protocol (tile-benchmark-methodology.md,
// adaptive_replay_span_v2) and its limits.
const (
	GraphProtocol   = "adaptive_replay_span_v2"
	GraphAttempts   = 4          // measured calibration attempts at most
	GraphTargetFrac = 0.8        // an attempt this close to the target ends calibration
	MaxGraphReplays = 65536      // replays per sample
	MaxGraphCalls   = 10_000_000 // logical calls per sample
	// MaxGraphWarmups bounds the warm-up's commands: doubling from one
	// replay reaches the replay cap in 17, and at the cap a timer that
	// answers far less time than it spends is caught.
	MaxGraphWarmups = 64
)

// Graph replays the visit's CUDA graph r times between the timer's two
// events: "graph SEQ R", answered with batch*r calls.
func (s *Session) Graph(r, batch int64) (span time.Duration, timerNs int64, err error) {
	return s.command("graph", r, batch*r)
}

// NextReplays is calibration's next replay count after r replays took ns:
// the ceiling of r scaled to target, at least 1, at most MaxGraphReplays
// and MaxGraphCalls/batch (twice r where ns is 0, below the events'
// resolution).
func NextReplays(r, ns, target, batch int64) int64 {
	next := r * 2 // ns 0: the span is below the events' resolution
	if ns > 0 {
		next = int64(math.Ceil(float64(r) * float64(target) / float64(ns)))
	}
	return max(1, min(next, MaxGraphReplays, MaxGraphCalls/max(batch, 1)))
}

// Calibrate is adaptive_replay_span_v2's calibration: from one replay, at
// most GraphAttempts measured attempts; an attempt whose span reaches
// GraphTargetFrac of target ends it, else the next count is the measured
// one scaled to the target (NextReplays), and a count the caps keep from
// growing ends it too. The last measured count is the samples' R, even
// when the target was not reached.
func Calibrate(measure func(r int64) (int64, error), batch, target int64) (int64, []artifacts.GraphAttempt, error) {
	r := int64(1)
	var attempts []artifacts.GraphAttempt
	for {
		ns, err := measure(r)
		if err != nil {
			return 0, attempts, err
		}
		attempts = append(attempts, artifacts.GraphAttempt{Replays: r, Ns: ns})
		next := NextReplays(r, ns, target, batch)
		if float64(ns) >= GraphTargetFrac*float64(target) || next == r || len(attempts) == GraphAttempts {
			return r, attempts, nil // r: the last measured count
		}
		r = next
	}
}

// CheckGraph checks a visit's graph record against the protocol: its
// limits, and every calibration decision again from the recorded spans.
// "" when it is one replay's calibration could have made.
func CheckGraph(g *artifacts.GraphRecord, batch int64, target, warmup time.Duration) string {
	switch {
	case g.Protocol != GraphProtocol:
		return fmt.Sprintf("protocol %q, want %q", g.Protocol, GraphProtocol)
	case g.Batch != batch:
		return fmt.Sprintf("batch %d, config.graphBatch %d", g.Batch, batch)
	case g.TargetNs != target.Nanoseconds() || g.WarmupTargetNs != warmup.Nanoseconds():
		return fmt.Sprintf("target %d ns and warm-up %d ns, config gives %d and %d", g.TargetNs, g.WarmupTargetNs, target.Nanoseconds(), warmup.Nanoseconds())
	case g.MaxReplays != MaxGraphReplays || g.MaxCalls != MaxGraphCalls:
		return fmt.Sprintf("caps %d replays and %d calls, want %d and %d", g.MaxReplays, g.MaxCalls, MaxGraphReplays, MaxGraphCalls)
	case g.FirstNs < 0 || g.WarmupNs < g.WarmupTargetNs || g.WarmupReplays < 1:
		return fmt.Sprintf("first replay %d ns, warm-up %d replays in %d ns: want a warm-up of at least the target %d ns", g.FirstNs, g.WarmupReplays, g.WarmupNs, g.WarmupTargetNs)
	case len(g.Attempts) == 0 || len(g.Attempts) > GraphAttempts:
		return fmt.Sprintf("%d calibration attempts, want 1 to %d", len(g.Attempts), GraphAttempts)
	}
	want := int64(1)
	for i, a := range g.Attempts {
		if a.Replays != want || a.Ns < 0 {
			return fmt.Sprintf("attempt %d: %d replays in %d ns; the protocol gives %d replays", i, a.Replays, a.Ns, want)
		}
		done := float64(a.Ns) >= GraphTargetFrac*float64(g.TargetNs)
		next := NextReplays(a.Replays, a.Ns, g.TargetNs, g.Batch)
		if last := i == len(g.Attempts)-1; last != (done || next == a.Replays || i == GraphAttempts-1) {
			if last {
				return fmt.Sprintf("attempt %d (%d ns, %d replays) ends calibration, but the protocol measures %d replays next", i, a.Ns, a.Replays, next)
			}
			return fmt.Sprintf("attempt %d (%d ns, %d replays) should have ended calibration", i, a.Ns, a.Replays)
		}
		want = next
	}
	if last := g.Attempts[len(g.Attempts)-1].Replays; g.Replays != last {
		return fmt.Sprintf("replays %d, want the last measured count %d", g.Replays, last)
	}
	return ""
}

// DriveGraph takes a GPU visit's graph samples: the untimed first replay
// (its events' span kept), replays for at least warmup, calibration
// (Calibrate) and count samples of the fixed count R, each N*R calls.
func (s *Session) DriveGraph(batch int64, count int, target, warmup time.Duration) ([]Sample, *artifacts.GraphRecord, error) {
	g := &artifacts.GraphRecord{Protocol: GraphProtocol, Batch: batch, WarmupTargetNs: warmup.Nanoseconds(), TargetNs: target.Nanoseconds(),
		MaxReplays: MaxGraphReplays, MaxCalls: MaxGraphCalls}
	take := func(kind string, i int, r int64) (Sample, error) {
		span, tn, err := s.Graph(r, batch)
		if err != nil {
			return Sample{}, err
		}
		smp := Sample{Kind: kind, Index: i, Calls: batch * r, SpanNs: span.Nanoseconds(), TimerNs: tn, Clock: samples.ClockCUDA, Tel: s.LastTelemetry()}
		return smp, CheckClock(smp)
	}
	first, err := take("graph first replay", 0, 1)
	if err != nil {
		return nil, g, err
	}
	if first.TimerNs <= 0 {
		// No graph of a call replays in no time: the timer did not time it.
		return nil, g, fail("graph_untimed: the first replay of a graph of %d calls took %d ns by the timer's events", batch, first.TimerNs)
	}
	g.FirstNs = first.TimerNs
	for r, n := int64(1), 0; g.WarmupReplays == 0 || g.WarmupNs < g.WarmupTargetNs; r, n = min(2*r, MaxGraphReplays, max(MaxGraphCalls/max(batch, 1), 1)), n+1 {
		if n == MaxGraphWarmups {
			return nil, g, fail("graph_warmup: %d warm-up commands (%d replays) took %d ns by the timer's events, short of the %d ns warm-up", n, g.WarmupReplays, g.WarmupNs, g.WarmupTargetNs)
		}
		smp, err := take("graph warm-up", 0, r)
		if err != nil {
			return nil, g, err
		}
		g.WarmupReplays += r
		g.WarmupNs += smp.TimerNs
	}
	g.Replays, g.Attempts, err = Calibrate(func(r int64) (int64, error) {
		smp, err := take("graph calibration", 0, r)
		return smp.TimerNs, err
	}, batch, g.TargetNs)
	if err != nil {
		return nil, g, err
	}
	var out []Sample
	for i := range count {
		smp, err := take(samples.KindGraph, i, g.Replays)
		if err != nil {
			return nil, g, err
		}
		out = append(out, smp)
	}
	return out, g, nil
}

// command sends "VERB SEQ N" and reads the sample report, which must
// count calls.
func (s *Session) command(verb string, n, calls int64) (span time.Duration, timerNs int64, err error) {
	return s.commandFrozen(verb, n, calls, false)
}

// commandFrozen is command; with frozen, the visit is thawed after the
// clock starts and frozen again before it stops.
func (s *Session) commandFrozen(verb string, n, calls int64, frozen bool) (span time.Duration, timerNs int64, err error) {
	s.tel = Telemetry{}
	var before samples.Reading
	if s.spec.Telemetry != nil {
		if before, err = s.spec.Telemetry(); err != nil {
			return 0, 0, fail("%v", err)
		}
	}
	s.seq++
	cmd := []byte(verb + " " + strconv.FormatInt(s.seq, 10) + " " + strconv.FormatInt(n, 10) + "\n")
	t0 := time.Now()
	if frozen {
		if err := s.Thaw(); err != nil {
			return 0, 0, err
		}
	}
	var slots *os.File
	if s.staging != nil {
		slots = s.staging.Slots
	}
	if err := s.send(cmd, slots); err != nil {
		// The timer is gone: what it left on fd 4 says more.
		if _, rerr := s.read(TypeSample); rerr != nil {
			return 0, 0, rerr
		}
		return 0, 0, err
	}
	r, err := s.read(TypeSample)
	if err == nil && frozen {
		err = s.Freeze()
	}
	if err == nil && s.staging != nil {
		err = s.staging.Probe()
	}
	span = time.Since(t0)
	if err == nil && s.staging != nil {
		err = s.staging.Unstage()
	}
	if err != nil {
		return 0, 0, err
	}
	if r.Seq != s.seq || r.Calls != calls {
		return 0, 0, fail("unexpected_report: sample seq %d calls %d, want seq %d calls %d", r.Seq, r.Calls, s.seq, calls)
	}
	if s.spec.Telemetry != nil {
		after, err := s.spec.Telemetry()
		if err != nil {
			return 0, 0, fail("%v", err)
		}
		s.tel = Telemetry{Source: samples.TelemetryNVML, Before: before, After: after}
	}
	return span, r.Ns, nil
}

// Telemetry is the GPU's state around one sample (samples.Row's).
type Telemetry struct {
	Source        string // "" (none) or samples.TelemetryNVML
	Before, After samples.Reading
}

// Flags are the sample's telemetry flags (samples.Flags).
func (t Telemetry) Flags() string { return samples.Flags(t.Source, t.Before, t.After) }

// LastTelemetry is the telemetry of the last sample command: read just
// before the command was written and just after its report, outside the
// span (none without Spec.Telemetry).
func (s *Session) LastTelemetry() Telemetry { return s.tel }

// PoisonsGPU says whether a visit's failure came from the CUDA driver (the
// CUDA timer's "cuda_error: ...", torch's "CUDA error: ..."), after which
// the device may be unusable: replay runs the GPU's health check before
// the next GPU visit.
func PoisonsGPU(reason string) bool {
	return strings.Contains(reason, "cuda_error:") || strings.Contains(reason, "CUDA error")
}
