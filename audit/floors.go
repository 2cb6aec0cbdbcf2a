package audit

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/oracle"
)

// floorsCheck re-applies the physical floors the replay measured and recorded:
// every recorded floor must follow from its own numbers and the case, and
// every row must pass or fail exactly as its floor says. The bandwidths
// and the clock are measured again here and this machine's CPU flags read:
// a recorded bandwidth far above this machine's, a recorded clock above
// 1.25x its own or a vector instruction set it lacks is a warning (the
// machines differ, or the number was forged: each lowers a floor); a
// recorded clock no CPU sustains, or above twice this machine's, fails.
// A GPU case's floor must follow from its session's GPU ceilings, which
// must agree with themselves and stay below what any GPU delivers
// (floors.CheckCeilings); the GPU is not measured again here (the auditor
// may have none).
func floorsCheck(cp *checkpoint, f *facts) finding {
	cases := map[string]artifacts.CapturedCase{}
	for _, c := range cp.cdoc.Cases {
		cases[c.Case.ID] = c
	}
	var flags []string
	if r, err := cp.rep.Receipt(); err == nil {
		flags = r.Predicate.Environment.CPUFlags
	}
	p, gpus, noGPU := sessionFloors(cp, cases, flags)
	fl := floors.OfSessions(cp.rdoc.Sessions)
	rp, w, n := rowFloors(cp, fl, cases, noGPU)
	p = append(p, rp...)
	// This machine's clock, bandwidth for each working set and CPU flags,
	// against the record.
	floors.WarmUp(200 * time.Millisecond)
	var recorded []float64
	for _, s := range cp.rdoc.Sessions {
		recorded = append(recorded, s.ClockHz)
	}
	clock := ownClock(slices.Max(append([]float64{0}, recorded...)))
	clp, clw := clockAgrees(recorded, clock)
	p, w = append(p, clp...), append(w, clw...)
	own, err := artifacts.CPUFlags(artifacts.CPUInfoPath)
	if err != nil {
		w = append(w, fmt.Sprintf("this machine's CPU flags: %v", err))
	} else {
		w = append(w, flagsAgree(flags, own)...)
	}
	mine := map[int]float64{}
	for _, f := range fl {
		if cases[f.Case].Case.DeviceOf() == oracle.DeviceCUDA {
			continue // a GPU's bandwidth, not this CPU's
		}
		if _, ok := mine[f.WorkingSet]; !ok {
			mine[f.WorkingSet] = floors.TouchBandwidth(f.WorkingSet, cp.rdoc.Config.Threads)
		}
		if f.Bandwidth > 4*mine[f.WorkingSet] {
			w = append(w, fmt.Sprintf("%s: the replay recorded %.1f GB/s for a %d-byte working set, this machine measures %.1f GB/s", f.Case, f.Bandwidth/1e9, f.WorkingSet, mine[f.WorkingSet]/1e9))
		}
	}
	return finding{problems: p, warnings: w, summary: fmt.Sprintf("%d timed rows against the floors replay measured (memory bandwidth per working set, clock x vector width), slack %d; clock: recorded %s, this machine %.2f GHz; vector flags: recorded %s, this machine %s%s",
		n, floors.Slack, ghz(recorded), clock/1e9, vectorFlags(flags), vectorFlags(own), gpuNote(gpus, fl))}
}

// sessionFloors checks every session's clock, GPU ceilings and floors
// against the capture (each floor made again from its case and the
// session's measurements); it returns the problems, each GPU's ceilings
// in words, and why sessions measured none.
func sessionFloors(cp *checkpoint, cases map[string]artifacts.CapturedCase, flags []string) (p, gpus []string, noGPU map[string]bool) {
	noGPU = map[string]bool{}
	for _, s := range cp.rdoc.Sessions {
		if s.ClockHz <= 0 {
			p = append(p, fmt.Sprintf("session %d: no measured clock", s.Index))
		}
		if s.GPU != nil {
			if err := floors.CheckCeilings(s.GPU); err != nil {
				p = append(p, fmt.Sprintf("session %d GPU %v", s.Index, err))
			}
			gpus = append(gpus, fmt.Sprintf("%s copies %.2f TB/s", s.GPU.Device, s.GPU.CopyBandwidth/1e12))
		} else if s.GPUError != "" {
			noGPU[s.GPUError] = true
		}
		for _, f := range s.Floors {
			c, ok := cases[f.Case]
			if !ok {
				p = append(p, fmt.Sprintf("session %d floor: case %s is not in the capture", s.Index, f.Case))
				continue
			}
			why := ""
			switch {
			case c.Case.DeviceOf() != oracle.DeviceCUDA:
				why = checkFloor(f, c, cp.rdoc.Config, s.ClockHz, flags)
			case s.GPU == nil:
				why = "a GPU case's floor, but the session recorded no GPU ceilings"
			default:
				why = checkGPUFloor(f, floors.GPUCase(c.Case, c.Signature, cp.rdoc.Config.Sets, s.GPU))
			}
			if why != "" {
				p = append(p, fmt.Sprintf("session %d floor of %s: %s", s.Index, f.Case, why))
			}
		}
	}
	return p, gpus, noGPU
}

// rowFloors judges every timed row against its case's floor fl as replay
// did (a passed row below it, a failed row whose reason is not the
// floor's), names a passed row above its GPU ceiling, and counts them.
func rowFloors(cp *checkpoint, fl map[string]artifacts.CaseFloor, cases map[string]artifacts.CapturedCase, noGPU map[string]bool) (p, w []string, n int) {
	for _, s := range cp.rdoc.Summary {
		if s.Samples == 0 {
			continue // not timed, or a failed visit
		}
		f, ok := fl[s.Case]
		if !ok && cases[s.Case].Case.DeviceOf() != oracle.DeviceCPU {
			// No session measured the GPU's ceilings (a replay made before
			// they were, or the GPU could not be measured).
			w = append(w, fmt.Sprintf("%s/%s: timed on the GPU without a GPU floor%s", s.Case, s.Route, reasons(noGPU)))
			continue
		}
		if !ok {
			p = append(p, fmt.Sprintf("%s/%s: timed, but no session recorded its floor", s.Case, s.Route))
			continue
		}
		why := floors.Below(f, floors.Fastest(s))
		if s.Status == artifacts.StatusPassed && why == "" {
			if above := aboveCeiling(f, s); above != "" {
				w = append(w, above)
			}
		}
		switch {
		case s.Status == artifacts.StatusPassed && why != "":
			p = append(p, fmt.Sprintf("%s/%s passed in replay, but %s", s.Case, s.Route, why))
		case s.Status == artifacts.StatusFailed && strings.HasPrefix(s.Reason, "below_physical_floor") && why != s.Reason:
			p = append(p, fmt.Sprintf("%s/%s: replay says %q, its recorded floor gives %q", s.Case, s.Route, s.Reason, why))
		}
		n++
	}
	return p, w, n
}

// gpuNote is the summary's words on the GPU ceilings and each GPU
// floor's own slacks, from its ceilings' spread ("" without a GPU).
func gpuNote(gpus []string, fl map[string]artifacts.CaseFloor) string {
	gpu := ""
	if len(gpus) > 0 {
		gpu = "; GPU ceilings as recorded (not measured here): " + strings.Join(slices.Compact(gpus), ", ")
	}
	var slacks []string
	for _, c := range slices.Sorted(maps.Keys(fl)) {
		f := fl[c]
		if f.MemorySlack > 0 || f.ComputeSlack > 0 {
			slacks = append(slacks, fmt.Sprintf("%.3g", floors.MemorySlack(f)))
			if f.ComputeNs > 0 {
				slacks = append(slacks, fmt.Sprintf("%.3g", floors.ComputeSlack(f)))
			}
		}
	}
	if len(slacks) > 0 {
		slices.Sort(slacks)
		gpu += " (GPU floor slacks from the ceilings' spread: " + strings.Join(slices.Compact(slacks), ", ") + ")"
	}
	return gpu
}

// reasons is ": " and the distinct reasons, or "".
func reasons(why map[string]bool) string {
	if len(why) == 0 {
		return ""
	}
	return ": " + strings.Join(slices.Sorted(maps.Keys(why)), "; ")
}

// checkGPUFloor compares a recorded GPU floor with the one its session's
// ceilings give (floors.GPUCase); "" when they agree.
func checkGPUFloor(f, want artifacts.CaseFloor) string {
	switch {
	case f.Device != want.Device:
		return fmt.Sprintf("device %q, want %q", f.Device, want.Device)
	case f.Bytes != want.Bytes || f.WorkingSet != want.WorkingSet:
		return fmt.Sprintf("bytes %d, working set %d; the case gives %d and %d", f.Bytes, f.WorkingSet, want.Bytes, want.WorkingSet)
	case f.L2Bytes != want.L2Bytes || f.MemorySlack != want.MemorySlack || f.ComputeSlack != want.ComputeSlack:
		return fmt.Sprintf("L2 %d bytes, slacks %g (memory) and %g (compute); the session's GPU ceilings give %d bytes, %g and %g", f.L2Bytes, f.MemorySlack, f.ComputeSlack, want.L2Bytes, want.MemorySlack, want.ComputeSlack)
	case f.Bandwidth != want.Bandwidth || !close(f.MemoryNs, want.MemoryNs):
		return fmt.Sprintf("memory floor %g ns at %g B/s; the session's GPU ceilings give %g ns at %g B/s", f.MemoryNs, f.Bandwidth, want.MemoryNs, want.Bandwidth)
	case f.Flops != want.Flops || f.PeakFlops != want.PeakFlops || !close(f.ComputeNs, want.ComputeNs) || f.ISA != want.ISA:
		return fmt.Sprintf("compute floor %g ns at %g flop/s (%s); the session's GPU ceilings give %g ns at %g flop/s (%s)", f.ComputeNs, f.PeakFlops, f.ISA, want.ComputeNs, want.PeakFlops, want.ISA)
	}
	return ""
}

// MaxClockHz is more than any CPU sustains on one core: a recorded clock
// above it is forged.
const MaxClockHz = 6.5e9

// Clock ratios between the replay's recorded clock and the auditor's own:
// above ClockWarn the machines differ or the clock was forged (a warning);
// above ClockFail the record cannot be believed (a failure). A higher
// clock lowers every compute floor in proportion.
const (
	ClockWarn = 1.25
	// Not 2: clocks differ that much between honest machines (a 5.7 GHz
	// desktop's replay audited on a 2.4 GHz server), and before
	// floors.Clock was unrolled this VM read 1.83 or 3.66 GHz depending
	// on the binary, exactly a factor 2.
	ClockFail = 3.0
)

// ownClock is this machine's clock: the best of up to three measurements
// (floors.Clock), stopping once one reaches the highest recorded clock
// over ClockWarn. Load only lowers a measurement, and a lowered one would
// blame an honest replay.
func ownClock(recorded float64) float64 {
	best := 0.0
	for range 3 {
		best = max(best, floors.Clock())
		if best*ClockWarn >= recorded {
			break
		}
	}
	return best
}

// clockAgrees judges each session's recorded clock (recorded[i] is session
// i's) against this machine's own (mine).
func clockAgrees(recorded []float64, mine float64) (p, w []string) {
	for i, hz := range recorded {
		switch {
		case hz > MaxClockHz:
			p = append(p, fmt.Sprintf("session %d: recorded clock %.2f GHz, above what any CPU sustains (%.1f GHz); this machine measures %.2f GHz", i, hz/1e9, MaxClockHz/1e9, mine/1e9))
		case mine > 0 && hz > ClockFail*mine:
			p = append(p, fmt.Sprintf("session %d: recorded clock %.2f GHz, more than %gx this machine's %.2f GHz: a higher clock lowers every compute floor", i, hz/1e9, ClockFail, mine/1e9))
		case mine > 0 && hz > ClockWarn*mine:
			w = append(w, fmt.Sprintf("session %d: recorded clock %.2f GHz, %.2fx this machine's %.2f GHz: machines differ or the clock was forged", i, hz/1e9, hz/mine, mine/1e9))
		}
	}
	return p, w
}

// vectorISA are the CPU flags that raise the flops per cycle a compute
// floor assumes (floors.PerCycle).
var vectorISA = []string{"avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16"}

// flagsAgree warns about every vector flag the replay's receipt records
// (recorded) that this machine (mine) lacks: the floor assumed it.
func flagsAgree(recorded, mine []string) []string {
	var w []string
	for _, f := range vectorISA {
		if slices.Contains(recorded, f) && !slices.Contains(mine, f) {
			w = append(w, fmt.Sprintf("the replay's CPU flags include %s, which this machine lacks: the compute floors assume it (machines differ or the flags were forged)", f))
		}
	}
	return w
}

// vectorFlags lists the vector flags among flags, for the summary.
func vectorFlags(flags []string) string {
	var v []string
	for _, f := range vectorISA {
		if slices.Contains(flags, f) {
			v = append(v, f)
		}
	}
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, " ")
}

func ghz(hz []float64) string {
	var s []string
	for _, h := range hz {
		s = append(s, fmt.Sprintf("%.2f", h/1e9))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ") + " GHz"
}

// checkFloor recomputes a recorded floor from the case, the replay's
// config and the session's clock; "" when it agrees.
func checkFloor(f artifacts.CaseFloor, c artifacts.CapturedCase, cfg artifacts.ReplayConfig, clockHz float64, flags []string) string {
	want := floors.Case(c.Case, c.Signature, cfg.Sets, cfg.Threads, clockHz, flags, func(int) float64 { return f.Bandwidth })
	switch {
	case f.Device != "":
		return fmt.Sprintf("device %q on a CPU case", f.Device)
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

// aboveCeiling names a passed GPU row whose fastest sample is faster than
// its binding ceiling allows (floors.AboveCeiling: above 100% of the copy
// bandwidth for the bytes its floor charges, or of the cuBLAS rate, its
// own session measured), though not below the floor (the ceiling over its
// slack), which replay fails. The ceiling is the GPU's own measurement
// minutes earlier, and the slack its spread and floors.GPUMargin, so such
// a row is named (a warning), not failed (issue 27: paced cheats sat at
// 112-163% of the strict cuBLAS rate with no word said). "" for a CPU
// row and for one within its ceiling.
func aboveCeiling(f artifacts.CaseFloor, s artifacts.Summary) string {
	if f.Device != oracle.DeviceCUDA {
		return ""
	}
	fastest := floors.Fastest(s)
	fr, which := floors.AboveCeiling(f, fastest)
	if fr <= 1 {
		return ""
	}
	ceiling := fmt.Sprintf("%.2f TB/s copy bandwidth", f.Bandwidth/1e12)
	if which == "compute" {
		ceiling = fmt.Sprintf("%.0f TFLOP/s (%s)", f.PeakFlops/1e12, f.ISA)
	}
	return fmt.Sprintf("%s/%s: fastest sample %.0f ns per call is %.0f%% of its %s ceiling, %s measured by its session: faster than the GPU measured possible (a ceiling measured low, a clock, or calls that did less)",
		s.Case, s.Route, fastest, 100*fr, which, ceiling)
}

func close(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
