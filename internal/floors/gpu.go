package floors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// GPU ceilings no real GPU reaches: a recorded number above one is
// forged. Copy bandwidth counts bytes read plus written (an HBM3e GPU of
// 8 TB/s copies at most 16 TB/s by that count); the rate is dense
// multiply-add flops of any dtype tilepipe times.
const (
	MaxGPUBandwidth = 30e12
	MaxGPUFlops     = 20e15
)

// gemmKinds are the dtype and policy of every rate `cuda-timer --ceilings`
// measures, in its order.
var gemmKinds = [][2]string{{"f32", "strict"}, {"f32", "tf32"}, {"f16", ""}, {"bf16", ""}}

// ceilingsWire is the CUDA timer's answer, key for key.
type ceilingsWire struct {
	Device        *string    `json:"device"`
	L2Bytes       *int64     `json:"l2_bytes"`
	CopyBytes     *int64     `json:"copy_bytes"`
	CopyReps      *int64     `json:"copy_reps"`
	CopyNs        *float64   `json:"copy_ns"`
	CopyWorstNs   *float64   `json:"copy_worst_ns"`
	CopyBandwidth *float64   `json:"copy_bandwidth"`
	Gemm          []gemmWire `json:"gemm"`
	GemmError     *string    `json:"gemm_error"`
}

type gemmWire struct {
	Dtype   *string  `json:"dtype"`
	Policy  *string  `json:"policy"`
	N       *int     `json:"n"`
	Reps    *int64   `json:"reps"`
	Ns      *float64 `json:"ns"`
	WorstNs *float64 `json:"worst_ns"`
	Flops   *float64 `json:"flops"`
}

// ParseCeilings reads `cuda-timer --ceilings`'s one JSON object: every key
// present, none more, nothing after it, and the numbers consistent
// (CheckCeilings).
func ParseCeilings(out []byte) (*artifacts.GPUCeilings, error) {
	d := json.NewDecoder(bytes.NewReader(out))
	d.DisallowUnknownFields()
	var w ceilingsWire
	if err := d.Decode(&w); err != nil {
		return nil, fmt.Errorf("ceilings: %v", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("ceilings: data after the object")
	}
	if w.Device == nil || w.L2Bytes == nil || w.CopyBytes == nil || w.CopyReps == nil || w.CopyNs == nil || w.CopyWorstNs == nil || w.CopyBandwidth == nil || w.Gemm == nil || w.GemmError == nil {
		return nil, errors.New("ceilings: want device, l2_bytes, copy_bytes, copy_reps, copy_ns, copy_worst_ns, copy_bandwidth, gemm and gemm_error")
	}
	g := &artifacts.GPUCeilings{Device: *w.Device, L2Bytes: *w.L2Bytes, CopyBytes: *w.CopyBytes, CopyReps: *w.CopyReps,
		CopyNs: *w.CopyNs, CopyWorstNs: *w.CopyWorstNs, CopyBandwidth: *w.CopyBandwidth, GemmError: *w.GemmError, Gemm: []artifacts.GemmRate{}}
	for i, r := range w.Gemm {
		if r.Dtype == nil || r.Policy == nil || r.N == nil || r.Reps == nil || r.Ns == nil || r.WorstNs == nil || r.Flops == nil {
			return nil, fmt.Errorf("ceilings: gemm[%d]: want dtype, policy, n, reps, ns, worst_ns and flops", i)
		}
		g.Gemm = append(g.Gemm, artifacts.GemmRate{Dtype: *r.Dtype, Policy: *r.Policy, N: *r.N, Reps: *r.Reps, Ns: *r.Ns, WorstNs: *r.WorstNs, Flops: *r.Flops})
	}
	if !(g.CopyWorstNs > 0) {
		return nil, fmt.Errorf("ceilings: copy_worst_ns %g: want the slowest of the copy's timed runs", g.CopyWorstNs)
	}
	if err := CheckCeilings(g); err != nil {
		return nil, err
	}
	return g, nil
}

// CheckCeilings checks recorded GPU ceilings against themselves: every
// number positive, each rate its own work over its own time, the rates in
// the timer's order with none missing unless GemmError says why, and none
// above what any GPU delivers (a forged record lowers every GPU floor).
func CheckCeilings(g *artifacts.GPUCeilings) error {
	switch {
	case g.Device == "":
		return errors.New("ceilings: no device name")
	case g.L2Bytes < 0 || g.CopyBytes <= 0 || g.CopyReps < 1 || !(g.CopyNs > 0):
		return fmt.Errorf("ceilings: copy of %d bytes, %d reps in %g ns, L2 %d bytes: want positive numbers", g.CopyBytes, g.CopyReps, g.CopyNs, g.L2Bytes)
	case !near(g.CopyBandwidth, float64(g.CopyBytes)*float64(g.CopyReps)/g.CopyNs*1e9):
		return fmt.Errorf("ceilings: copy bandwidth %g B/s, but %d bytes x %d in %g ns is %g", g.CopyBandwidth, g.CopyBytes, g.CopyReps, g.CopyNs, float64(g.CopyBytes)*float64(g.CopyReps)/g.CopyNs*1e9)
	case g.CopyBandwidth > MaxGPUBandwidth:
		return fmt.Errorf("ceilings: copy bandwidth %.1f TB/s, above what any GPU delivers (%.0f TB/s)", g.CopyBandwidth/1e12, MaxGPUBandwidth/1e12)
	case len(g.Gemm) > len(gemmKinds) || (len(g.Gemm) < len(gemmKinds) && g.GemmError == ""):
		return fmt.Errorf("ceilings: %d gemm rates, want %d (or fewer and gemm_error saying why)", len(g.Gemm), len(gemmKinds))
	case g.CopyWorstNs != 0 && !(g.CopyWorstNs >= g.CopyNs):
		return fmt.Errorf("ceilings: copy's slowest run %g ns, faster than its best %g ns", g.CopyWorstNs, g.CopyNs)
	}
	for i, r := range g.Gemm {
		work := 2 * math.Pow(float64(r.N), 3) * float64(r.Reps)
		switch {
		case r.Dtype != gemmKinds[i][0] || r.Policy != gemmKinds[i][1]:
			return fmt.Errorf("ceilings: gemm[%d] is %s %q, want %s %q", i, r.Dtype, r.Policy, gemmKinds[i][0], gemmKinds[i][1])
		case r.N < 1 || r.Reps < 1 || !(r.Ns > 0):
			return fmt.Errorf("ceilings: gemm %s %s: n %d, %d reps in %g ns: want positive numbers", r.Dtype, r.Policy, r.N, r.Reps, r.Ns)
		case !near(r.Flops, work/r.Ns*1e9):
			return fmt.Errorf("ceilings: gemm %s %s: %g flop/s, but %d^3 x %d in %g ns is %g", r.Dtype, r.Policy, r.Flops, r.N, r.Reps, r.Ns, work/r.Ns*1e9)
		case r.Flops > MaxGPUFlops:
			return fmt.Errorf("ceilings: gemm %s %s: %.0f TFLOP/s, above what any GPU delivers (%.0f TFLOP/s)", r.Dtype, r.Policy, r.Flops/1e12, MaxGPUFlops/1e12)
		case (r.WorstNs == 0) != (g.CopyWorstNs == 0):
			return fmt.Errorf("ceilings: gemm %s %s: slowest run %g ns beside the copy's %g: want the spread of every ceiling or of none", r.Dtype, r.Policy, r.WorstNs, g.CopyWorstNs)
		case r.WorstNs != 0 && !(r.WorstNs >= r.Ns):
			return fmt.Errorf("ceilings: gemm %s %s: slowest run %g ns, faster than its best %g ns", r.Dtype, r.Policy, r.WorstNs, r.Ns)
		}
	}
	return nil
}

// near: equal to the timer's printed precision (7 significant digits).
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-5*math.Max(math.Abs(a), math.Abs(b))
}

// GemmFor is the measured rate for a case's dtype and policy: f32 strict
// (or no policy), f32 tf32, f16, bf16; nil when it was not measured.
func GemmFor(g *artifacts.GPUCeilings, dtype, policy string) *artifacts.GemmRate {
	if dtype == "" {
		dtype = "f32"
	}
	want := ""
	if dtype == "f32" {
		want = "strict"
		if policy == "tf32" {
			want = "tf32"
		}
	}
	for i := range g.Gemm {
		if g.Gemm[i].Dtype == dtype && g.Gemm[i].Policy == want {
			return &g.Gemm[i]
		}
	}
	return nil
}

// GPUMargin is how far above a ceiling's best run an honest kernel may
// go, beyond the ceiling's own spread: the copy counts a read and a write
// of every byte (a kernel that only reads may stream a few percent
// faster), and cuBLAS's 8192^3 GemmEx is not the tensor cores' every last
// flop (docs/gpu.md, "Ceilings").
const GPUMargin = 1.10

// GPUSlack is the slack of a floor from a ceiling whose best timed run
// took bestNs and slowest worstNs: GPUMargin times worst over best (a
// ceiling measured five times within 1% gives about 1.11), at most Slack;
// Slack for ceilings that kept no spread (worstNs 0).
func GPUSlack(bestNs, worstNs float64) float64 {
	if !(worstNs > 0) || !(bestNs > 0) {
		return Slack
	}
	return min(GPUMargin*worstNs/bestNs, Slack)
}

// Charged is the bytes a GPU floor charges at the copy bandwidth: the
// call's bytes beyond twice its L2 (what it may find in the cache when it
// starts, and what it may leave there dirty when it ends, costs it no
// memory traffic during the call), or all of them where no L2 is left out.
func Charged(f artifacts.CaseFloor) int {
	return max(0, f.Bytes-2*int(f.L2Bytes))
}

// GPUCase is one cuda case's floors from the session's GPU ceilings: its
// bytes at the device-to-device copy bandwidth, its flops at cuBLAS's rate
// for its dtype and policy, each divided by its slack. Ceilings that keep
// their spread (CopyWorstNs) give each floor a slack of its own
// (GPUSlack) and charge only the bytes beyond twice the L2 (Charged);
// older ones give slack 2 and charge every byte, as replays made then
// recorded (docs/gpu.md, "Ceilings").
func GPUCase(c oracle.Case, sig []oracle.Param, warmSets int, g *artifacts.GPUCeilings) artifacts.CaseFloor {
	f := artifacts.CaseFloor{Case: c.ID, Device: oracle.DeviceCUDA, Bytes: MinBytes(c, sig), WorkingSet: warmSets * ColdBytes(sig), Bandwidth: g.CopyBandwidth}
	spread := g.CopyWorstNs > 0
	if spread {
		f.L2Bytes, f.MemorySlack = g.L2Bytes, GPUSlack(g.CopyNs, g.CopyWorstNs)
	}
	if f.Bandwidth > 0 {
		f.MemoryNs = float64(Charged(f)) / f.Bandwidth * 1e9 / MemorySlack(f)
	}
	if f.Flops = Flops(c); f.Flops > 0 {
		if r := GemmFor(g, c.Dtype, c.Policy); r != nil {
			f.PeakFlops = r.Flops
			if spread {
				f.ComputeSlack = GPUSlack(r.Ns, r.WorstNs)
			}
			f.ComputeNs = f.Flops / f.PeakFlops * 1e9 / ComputeSlack(f)
			kind := r.Dtype
			if r.Policy != "" {
				kind += " " + r.Policy
			}
			f.ISA = fmt.Sprintf("cuBLAS GemmEx %s %d^3 on %s", kind, r.N, g.Device)
		}
	}
	return f
}

// Fraction is how much of its ceiling a row reached: every byte of a call
// at the floor's bandwidth, or its flops at the floor's peak, whichever
// takes longer, over its time per call, and which ceiling that was; 0 and
// "" without a floor or a time. What people read (a working set in a GPU's
// L2 may exceed 100% of memory); AboveCeiling is what a floor allows.
func Fraction(f artifacts.CaseFloor, perCallNs float64) (float64, string) {
	if perCallNs <= 0 {
		return 0, ""
	}
	var mem, comp float64
	if f.Bandwidth > 0 {
		mem = float64(f.Bytes) / f.Bandwidth * 1e9
	}
	if f.PeakFlops > 0 {
		comp = f.Flops / f.PeakFlops * 1e9
	}
	return fraction(mem, comp, perCallNs)
}

// AboveCeiling is Fraction by the floor's own terms: its floors without
// their slacks (for a GPU floor, the bytes it charges), over the time per
// call. Above 1, the row ran faster than its ceiling allows.
func AboveCeiling(f artifacts.CaseFloor, perCallNs float64) (float64, string) {
	if perCallNs <= 0 {
		return 0, ""
	}
	return fraction(f.MemoryNs*MemorySlack(f), f.ComputeNs*ComputeSlack(f), perCallNs)
}

func fraction(mem, comp, perCallNs float64) (float64, string) {
	switch {
	case comp > mem && comp > 0:
		return comp / perCallNs, "compute"
	case mem > 0:
		return mem / perCallNs, "memory"
	}
	return 0, ""
}
