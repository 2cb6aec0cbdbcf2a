package audit

import (
	"fmt"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/floors"
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
	floors.WarmUp(200 * time.Millisecond)
	for _, s := range a.rdoc.Summary {
		if s.Status != artifacts.StatusPassed || s.MinNs <= 0 {
			continue
		}
		c := cases[s.Case]
		bytes := floors.MinBytes(c.Case, c.Signature)
		if _, ok := bw[bytes]; !ok {
			bw[bytes] = floors.TouchBandwidth(bytes, a.rdoc.Config.Threads)
		}
		// A kernel touches each byte of its inputs and outputs at least
		// once; the slack leaves room for a kernel that streams better
		// than Go's copy: only times clearly below what the memory
		// system can deliver are flagged.
		floorNs := float64(bytes) / bw[bytes] * 1e9 / floors.Slack
		if s.MinNs < floorNs {
			w = append(w, fmt.Sprintf("%s/%s: fastest sample %.0f ns per op is below the memory floor %.0f ns (%d bytes at %.1f GB/s read+write, slack %d)", s.Case, s.Route, s.MinNs, floorNs, bytes, bw[bytes]/1e9, floors.Slack))
		}
		peak, peakWhy := floors.FlopPeak(env, c.Case.Dtype)
		if fl := floors.Flops(c.Case); fl > 0 && peak > 0 {
			if f := fl / peak * 1e9; s.MinNs < f {
				w = append(w, fmt.Sprintf("%s/%s: fastest sample %.0f ns per op is below the compute floor %.0f ns (%.3g flop at %s)", s.Case, s.Route, s.MinNs, f, fl, peakWhy))
			}
		}
		n++
	}
	_, peakWhy := floors.FlopPeak(env, "f32")
	a.add("physical floor", nil, w, fmt.Sprintf("%d timed rows against measured copy bandwidth and nominal peak (FP32: %s)", n, peakWhy))
}
