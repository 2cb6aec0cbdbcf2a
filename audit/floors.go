package audit

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/floors"
)

// floors re-applies the physical floors the replay measured and recorded:
// every recorded floor must follow from its own numbers and the case, and
// every row must pass or fail exactly as its floor says. The bandwidths
// are measured again here; one the replay recorded far above this
// machine's is a warning (the machines differ; a forged bandwidth lowers
// every floor).
func (a *auditor) floors() {
	var p, w []string
	cases := map[string]artifacts.CapturedCase{}
	for _, c := range a.cdoc.Cases {
		cases[c.Case.ID] = c
	}
	var flags []string
	if r, err := a.rep.Receipt(); err == nil {
		flags = r.Predicate.Environment.CPUFlags
	}
	var all [][]artifacts.CaseFloor
	for _, s := range a.rdoc.Sessions {
		if s.ClockHz <= 0 {
			p = append(p, fmt.Sprintf("session %d: no measured clock", s.Index))
		}
		for _, f := range s.Floors {
			c, ok := cases[f.Case]
			if !ok {
				p = append(p, fmt.Sprintf("session %d floor: case %s is not in the capture", s.Index, f.Case))
				continue
			}
			if why := checkFloor(f, c, a.rdoc.Config, s.ClockHz, flags); why != "" {
				p = append(p, fmt.Sprintf("session %d floor of %s: %s", s.Index, f.Case, why))
			}
		}
		all = append(all, s.Floors)
	}
	fl := floors.Lowest(all)
	n := 0
	for _, s := range a.rdoc.Summary {
		if s.Samples == 0 {
			continue // not timed, or a failed visit
		}
		f, ok := fl[s.Case]
		if !ok {
			p = append(p, fmt.Sprintf("%s/%s: timed, but no session recorded its floor", s.Case, s.Route))
			continue
		}
		why := floors.Below(f, s.MinNs)
		switch {
		case s.Status == artifacts.StatusPassed && why != "":
			p = append(p, fmt.Sprintf("%s/%s passed in replay, but %s", s.Case, s.Route, why))
		case s.Status == artifacts.StatusFailed && strings.HasPrefix(s.Reason, "below_physical_floor") && why != s.Reason:
			p = append(p, fmt.Sprintf("%s/%s: replay says %q, its recorded floor gives %q", s.Case, s.Route, s.Reason, why))
		}
		n++
	}
	// This machine's bandwidth for each working set, against the record.
	floors.WarmUp(200 * time.Millisecond)
	mine := map[int]float64{}
	for _, f := range fl {
		if _, ok := mine[f.WorkingSet]; !ok {
			mine[f.WorkingSet] = floors.TouchBandwidth(f.WorkingSet, a.rdoc.Config.Threads)
		}
		if f.Bandwidth > 4*mine[f.WorkingSet] {
			w = append(w, fmt.Sprintf("%s: the replay recorded %.1f GB/s for a %d-byte working set, this machine measures %.1f GB/s", f.Case, f.Bandwidth/1e9, f.WorkingSet, mine[f.WorkingSet]/1e9))
		}
	}
	a.add("physical floor", p, w, fmt.Sprintf("%d timed rows against the floors replay measured (memory bandwidth per working set, clock x vector width), slack %d", n, floors.Slack))
}

// checkFloor recomputes a recorded floor from the case, the replay's
// config and the session's clock; "" when it agrees.
func checkFloor(f artifacts.CaseFloor, c artifacts.CapturedCase, cfg artifacts.ReplayConfig, clockHz float64, flags []string) string {
	want := floors.Case(c.Case, c.Signature, cfg.Sets, cfg.Threads, clockHz, flags, func(int) float64 { return f.Bandwidth })
	switch {
	case f.Bytes != want.Bytes || f.WorkingSet != want.WorkingSet:
		return fmt.Sprintf("bytes %d, working set %d; the case gives %d and %d", f.Bytes, f.WorkingSet, want.Bytes, want.WorkingSet)
	case f.Bandwidth <= 0 || !close(f.MemoryNs, want.MemoryNs):
		return fmt.Sprintf("memory floor %g ns at %g B/s; its numbers give %g ns", f.MemoryNs, f.Bandwidth, want.MemoryNs)
	case f.Flops != want.Flops:
		return fmt.Sprintf("%g flop; the case gives %g", f.Flops, want.Flops)
	case f.Flops > 0 && (!close(f.PeakFlops, want.PeakFlops) || !close(f.ComputeNs, want.ComputeNs)):
		return fmt.Sprintf("compute floor %g ns at %g flop/s; %d threads at the session's clock with the receipt's CPU flags (%s) give %g ns at %g flop/s",
			f.ComputeNs, f.PeakFlops, cfg.Threads, want.ISA, want.ComputeNs, want.PeakFlops)
	}
	return ""
}

func close(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
