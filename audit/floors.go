package audit

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// floors flags per-op times below the physical floor: the bytes a case must
// read and write divided by this machine's copy bandwidth at that size, and
// the flops of a matrix op divided by the machine's nominal FP32 peak. A
// time below a floor means the kernel skipped work (or cached its answer).
func (a *auditor) floors() {
	// The compute floor is the replay machine's (from its receipt); the
	// memory floor is measured here, on the auditor's machine.
	var env artifacts.Environment
	if r, err := a.rep.Receipt(); err == nil {
		env = r.Predicate.Environment
	}
	var w []string
	cases := map[string]artifacts.CapturedCase{}
	for _, c := range a.cdoc.Cases {
		cases[c.Case.ID] = c
	}
	bw := map[int]float64{}
	n := 0
	// Wake the cores (an idle virtual CPU starts slow) before measuring.
	warmUp(200 * time.Millisecond)
	for _, s := range a.rdoc.Summary {
		if s.Status != artifacts.StatusPassed || s.MinNs <= 0 {
			continue
		}
		c := cases[s.Case]
		bytes := minBytes(c.Case, c.Signature)
		if _, ok := bw[bytes]; !ok {
			bw[bytes] = touchBandwidth(bytes, a.rdoc.Config.Threads)
		}
		// A kernel touches each byte of its inputs and outputs at least
		// once; the slack leaves room for a kernel that streams better
		// than Go's copy: only times clearly below what the memory
		// system can deliver are flagged.
		floorNs := float64(bytes) / bw[bytes] * 1e9 / floorSlack
		if s.MinNs < floorNs {
			w = append(w, fmt.Sprintf("%s/%s: fastest sample %.0f ns per op is below the memory floor %.0f ns (%d bytes at %.1f GB/s read+write, slack %d)", s.Case, s.Route, s.MinNs, floorNs, bytes, bw[bytes]/1e9, floorSlack))
		}
		peak, peakWhy := flopPeak(env, c.Case.Dtype)
		if fl := flops(c.Case); fl > 0 && peak > 0 {
			if f := fl / peak * 1e9; s.MinNs < f {
				w = append(w, fmt.Sprintf("%s/%s: fastest sample %.0f ns per op is below the compute floor %.0f ns (%.3g flop at %s)", s.Case, s.Route, s.MinNs, f, fl, peakWhy))
			}
		}
		n++
	}
	_, peakWhy := flopPeak(env, "f32")
	a.add("physical floor", nil, w, fmt.Sprintf("%d timed rows against measured copy bandwidth and nominal peak (FP32: %s)", n, peakWhy))
}

// minBytes is what a case must at least read and write: every tensor once,
// except that a gather (embedding) reads only the table rows its ids name.
func minBytes(c oracle.Case, sig []oracle.Param) int {
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

// flops is the multiply-add work a matrix op cannot avoid (two flops per
// term); attention counts only the keys its causal mask leaves visible.
func flops(c oracle.Case) float64 {
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

// floorSlack divides each floor, so that only times well below it warn.
const floorSlack = 2

var sink byte

// touchBandwidth measures the bytes per second this machine reads plus
// writes with Go's copy when the working set (sources and destinations
// together) is n bytes, split over the replay's threads, so it sits in the
// same level of the cache hierarchy as the kernel's data: the best of
// several timed rounds of warm copies.
func touchBandwidth(n, threads int) float64 {
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
	for t := 0; t < 10; t++ {
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < threads; i++ {
			wg.Add(1)
			go func(s, d []byte) {
				defer wg.Done()
				for r := 0; r < reps; r++ {
					copy(d, s)
				}
			}(src[i], dst[i])
		}
		wg.Wait()
		if d := time.Since(start); d < best {
			best = d
		}
	}
	for i := range dst {
		sink ^= dst[i][part-1]
	}
	return float64(2*part*threads) * float64(reps) / best.Seconds()
}

// warmUp keeps every core busy copying for d.
func warmUp(d time.Duration) {
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

// flopPeak is cores x clock x flops per cycle of the machine env describes,
// for matrix arithmetic on the case's storage dtype: FP32 FMA (two units of
// 16 lanes with AVX-512, 8 with AVX2+FMA, else 4 lanes without FMA); for
// bf16 and f16, AMX tiles (1024 multiply-adds per cycle) or AVX-512
// BF16/FP16 dot products where the CPU has them.
func flopPeak(env artifacts.Environment, dtype string) (float64, string) {
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
