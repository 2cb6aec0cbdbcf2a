// Package floors measures what a machine's memory and arithmetic can
// deliver, so that a time below what physics allows is a failure
// (docs/threat-model.md, "impossible times"). Replay measures and records
// the floors; the audit re-applies the recorded ones.
package floors

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// MinBytes is what a case must at least read and write: every tensor once,
// except that a gather (embedding) reads only the table rows its ids name.
func MinBytes(c oracle.Case, sig []oracle.Param) int {
	n := 0
	for _, p := range sig {
		if c.Op == "embedding" && p.Name == "E" {
			n += c.Dims["M"] * c.Dims["D"] * oracle.DtypeSize(p.Dtype)
			continue
		}
		n += p.Bytes()
	}
	return n
}

// Flops is the multiply-add work a matrix op cannot avoid (two flops per
// term); attention counts only the keys its causal mask leaves visible.
func Flops(c oracle.Case) float64 {
	d := func(k string) float64 { return float64(c.Dims[k]) }
	switch c.Op {
	case "gemm", "gemm_relu", "gemm_gelu":
		return 2 * d("M") * d("N") * d("K")
	case "bmm":
		return 2 * d("B") * d("M") * d("N") * d("K")
	case "gemv":
		return 2 * d("M") * d("K")
	case "attention":
		Q, K := d("Q"), d("K")
		visible := Q*(K-Q) + Q*(Q+1)/2 // query q sees keys 0..q+K-Q
		return 2 * d("B") * d("Hq") * visible * (d("D") + d("Dv"))
	}
	return 0
}

// Slack divides each floor, so that only times well below it warn: every
// CPU floor's, and a GPU floor's from ceilings that kept no spread. A GPU
// floor from ceilings that did has slacks of its own (GPUSlack).
const Slack = 2

// MemorySlack and ComputeSlack are the slacks f's floors were divided by:
// the ones it records, or Slack.
func MemorySlack(f artifacts.CaseFloor) float64 {
	if f.MemorySlack > 0 {
		return f.MemorySlack
	}
	return Slack
}

func ComputeSlack(f artifacts.CaseFloor) float64 {
	if f.ComputeSlack > 0 {
		return f.ComputeSlack
	}
	return Slack
}

// TouchBandwidth measures the bytes per second this machine reads plus
// writes with Go's copy when the working set (sources and destinations
// together) is n bytes, split over threads, so it sits in the same level
// of the cache hierarchy as the kernel's data: the better of whole copies
// and copies in 64 KiB pieces, each the best of several timed rounds. The
// pieces matter: Go's copy of a few MiB or more uses stores that bypass
// the cache, and measures memory where the data sits in the last-level
// cache (a 6 MiB working set here: 53 GB/s whole, 168 GB/s in pieces).
func TouchBandwidth(n, threads int) float64 {
	threads = max(1, threads)
	part := max(2048, n/(2*threads))
	src, dst := make([][]byte, threads), make([][]byte, threads)
	for i := range src {
		src[i], dst[i] = make([]byte, part), make([]byte, part)
		for j := range src[i] {
			src[i][j] = byte(j)
		}
	}
	reps := max(1, (32<<20)/part)
	best := time.Duration(1 << 62)
	pieces := []int{part}
	if n <= 64<<20 { // beyond, the data is in memory however it is copied
		pieces = append(pieces, 64<<10)
	}
	for _, piece := range pieces {
		for t := 0; t < 10; t++ {
			var wg sync.WaitGroup
			start := time.Now()
			for i := 0; i < threads; i++ {
				wg.Add(1)
				go func(s, d []byte) {
					defer wg.Done()
					for r := 0; r < reps; r++ {
						for o := 0; o < len(s); o += piece {
							copy(d[o:min(o+piece, len(d))], s[o:min(o+piece, len(s))])
						}
					}
				}(src[i], dst[i])
			}
			wg.Wait()
			if d := time.Since(start); d < best {
				best = d
			}
		}
	}
	runtime.KeepAlive(dst)
	return float64(2*part*threads) * float64(reps) / best.Seconds()
}

// WarmUp keeps every core busy copying for d.
func WarmUp(d time.Duration) {
	var wg sync.WaitGroup
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := make([]byte, 1<<20), make([]byte, 1<<20)
			for end := time.Now().Add(d); time.Now().Before(end); {
				copy(a, b)
			}
		}()
	}
	wg.Wait()
}

// FlopPeak is cores x clock x flops per cycle of the machine env describes,
// for matrix arithmetic on the case's storage dtype: FP32 FMA (two units of
// 16 lanes with AVX-512, 8 with AVX2+FMA, else 4 lanes without FMA); for
// bf16 and f16, AMX tiles (1024 multiply-adds per cycle) or AVX-512
// BF16/FP16 dot products where the CPU has them.
func FlopPeak(env artifacts.Environment, dtype string) (float64, string) {
	if env.CPUMHz == 0 || env.CPUs == 0 {
		return 0, "unknown clock: no compute floor"
	}
	has := func(f string) bool { return slices.Contains(env.CPUFlags, f) }
	perCycle, isa := 8.0, "SSE"
	switch {
	case dtype == "bf16" && has("amx_bf16"), dtype == "f16" && has("amx_fp16"):
		perCycle, isa = 2048, "AMX "+dtype
	case dtype == "bf16" && has("avx512_bf16"), dtype == "f16" && has("avx512_fp16"):
		perCycle, isa = 128, "AVX-512 "+dtype
	case has("avx512f"):
		perCycle, isa = 64, "AVX-512 FMA"
	case has("avx2") && has("fma"):
		perCycle, isa = 32, "AVX2 FMA"
	}
	// Turbo can exceed the reported clock; allow 1.5x.
	peak := float64(env.CPUs) * env.CPUMHz * 1e6 * 1.5 * perCycle
	return peak, fmt.Sprintf("%.0f GFLOP/s = %d cores x %.0f MHz x 1.5 turbo x %g flop/cycle %s", peak/1e9, env.CPUs, env.CPUMHz, perCycle, isa)
}

// ColdBytes is the working set of a cold call: every byte of every tensor
// of one buffer set.
func ColdBytes(sig []oracle.Param) int {
	n := 0
	for _, p := range sig {
		n += p.Bytes()
	}
	return n
}

// ColdSize is the buffer ColdBandwidth streams through: far beyond any
// cache, so every byte comes from memory.
const ColdSize = 256 << 20

// ColdBandwidth is the read+write bandwidth of Go's copy over ColdSize
// bytes with threads threads: what a kernel whose data is in memory, not
// in cache, can at best get.
func ColdBandwidth(threads int) float64 { return TouchBandwidth(ColdSize, threads) }

var clockSink uint64

// Clock measures the rate of a chain of dependent integer additions on
// one core: one addition per cycle at best, so the result is at most the
// core's clock while it runs (turbo included), and usually equal to it.
// The best of several runs, after a warm-up. Four additions of the chain
// per iteration: with one, the loop's own instructions ran it at one or
// two cycles per addition depending on where the binary placed it (1.82
// GHz in one binary, 3.66 in another on the development VM, whose core
// runs at 3.66 GHz); with four, 3.66 in both.
func Clock() float64 {
	const n = 1 << 26
	best := time.Duration(1 << 62)
	for t := 0; t < 7; t++ {
		x := clockSink
		start := time.Now()
		for i := uint64(0); i < n; i += 4 {
			x += i
			x += i ^ 1
			x += i ^ 2
			x += i ^ 3
		}
		d := time.Since(start)
		clockSink = x
		if d < best {
			best = d
		}
	}
	return n / best.Seconds()
}

// PerCycle is the multiply-add flops per cycle and core the CPU's flags
// promise for matrix arithmetic on dtype (see [FlopPeak]), and the
// instruction set that gives them.
func PerCycle(flags []string, dtype string) (float64, string) {
	has := func(f string) bool { return slices.Contains(flags, f) }
	switch {
	case dtype == "bf16" && has("amx_bf16"), dtype == "f16" && has("amx_fp16"):
		return 2048, "AMX " + dtype
	case dtype == "bf16" && has("avx512_bf16"), dtype == "f16" && has("avx512_fp16"):
		return 128, "AVX-512 " + dtype
	case has("avx512f"):
		return 64, "AVX-512 FMA"
	case has("avx2") && has("fma"):
		return 32, "AVX2 FMA"
	}
	return 8, "SSE"
}

// Case is one case's floors on one machine, as replay records them
// (artifacts.CaseFloor).
func Case(c oracle.Case, sig []oracle.Param, warmSets, threads int, clockHz float64, flags []string, bw func(n int) float64) artifacts.CaseFloor {
	f := artifacts.CaseFloor{Case: c.ID, Bytes: MinBytes(c, sig), WorkingSet: warmSets * ColdBytes(sig)}
	f.Bandwidth = bw(f.WorkingSet)
	if f.Bandwidth > 0 {
		f.MemoryNs = float64(f.Bytes) / f.Bandwidth * 1e9 / Slack
	}
	if f.Flops = Flops(c); f.Flops > 0 && clockHz > 0 {
		per, isa := PerCycle(flags, c.Dtype)
		f.PeakFlops = float64(max(threads, 1)) * clockHz * per
		f.ComputeNs = f.Flops / f.PeakFlops * 1e9 / Slack
		f.ISA = isa
	}
	return f
}

// Below names how a row whose fastest sample took minNs per call breaks
// its floor, or returns "".
func Below(f artifacts.CaseFloor, minNs float64) string {
	switch {
	case f.MemoryNs > 0 && minNs < f.MemoryNs:
		bytes := fmt.Sprintf("%d bytes", f.Bytes)
		if f.L2Bytes > 0 {
			bytes = fmt.Sprintf("%d of %d bytes beyond twice the %d-byte L2", Charged(f), f.Bytes, f.L2Bytes)
		}
		return fmt.Sprintf("below_physical_floor: fastest sample %.0f ns per call, memory floor %.0f ns (%s at %.1f GB/s for a %d-byte working set, slack %.4g)",
			minNs, f.MemoryNs, bytes, f.Bandwidth/1e9, f.WorkingSet, MemorySlack(f))
	case f.ComputeNs > 0 && minNs < f.ComputeNs:
		return fmt.Sprintf("below_physical_floor: fastest sample %.0f ns per call, compute floor %.0f ns (%.3g flop at %.0f GFLOP/s %s, slack %.4g)",
			minNs, f.ComputeNs, f.Flops, f.PeakFlops/1e9, f.ISA, ComputeSlack(f))
	}
	return ""
}

// Fastest is the time per call a summary's floor check judges: its
// fastest novel sample, or its fastest graph sample where that is faster
// (replay's summaries and the audit's recomputation and floors check).
func Fastest(s artifacts.Summary) float64 {
	if s.GraphMinNs > 0 && s.GraphMinNs < s.MinNs {
		return s.GraphMinNs
	}
	return s.MinNs
}

// OfSessions is, per case, the most lenient floor any of a replay's
// sessions measured: what replay's summaries judge every row by, and the
// audit's recomputation of them.
func OfSessions(sessions []artifacts.Session) map[string]artifacts.CaseFloor {
	var all [][]artifacts.CaseFloor
	for _, s := range sessions {
		all = append(all, s.Floors)
	}
	return Lowest(all)
}

// Lowest is, per case, the most lenient of several sessions' floors.
func Lowest(sessions [][]artifacts.CaseFloor) map[string]artifacts.CaseFloor {
	out := map[string]artifacts.CaseFloor{}
	for _, fs := range sessions {
		for _, f := range fs {
			o, ok := out[f.Case]
			if !ok {
				out[f.Case] = f
				continue
			}
			if f.MemoryNs < o.MemoryNs {
				o.Bytes, o.WorkingSet, o.Bandwidth, o.MemoryNs, o.L2Bytes, o.MemorySlack = f.Bytes, f.WorkingSet, f.Bandwidth, f.MemoryNs, f.L2Bytes, f.MemorySlack
			}
			if f.ComputeNs < o.ComputeNs {
				o.Flops, o.PeakFlops, o.ComputeNs, o.ISA, o.ComputeSlack = f.Flops, f.PeakFlops, f.ComputeNs, f.ISA, f.ComputeSlack
			}
			out[f.Case] = o
		}
	}
	return out
}
