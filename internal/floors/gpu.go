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
	CopyBandwidth *float64   `json:"copy_bandwidth"`
	Gemm          []gemmWire `json:"gemm"`
	GemmError     *string    `json:"gemm_error"`
}

type gemmWire struct {
	Dtype  *string  `json:"dtype"`
	Policy *string  `json:"policy"`
	N      *int     `json:"n"`
	Reps   *int64   `json:"reps"`
	Ns     *float64 `json:"ns"`
	Flops  *float64 `json:"flops"`
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
	if w.Device == nil || w.L2Bytes == nil || w.CopyBytes == nil || w.CopyReps == nil || w.CopyNs == nil || w.CopyBandwidth == nil || w.Gemm == nil || w.GemmError == nil {
		return nil, errors.New("ceilings: want device, l2_bytes, copy_bytes, copy_reps, copy_ns, copy_bandwidth, gemm and gemm_error")
	}
	g := &artifacts.GPUCeilings{Device: *w.Device, L2Bytes: *w.L2Bytes, CopyBytes: *w.CopyBytes, CopyReps: *w.CopyReps,
		CopyNs: *w.CopyNs, CopyBandwidth: *w.CopyBandwidth, GemmError: *w.GemmError, Gemm: []artifacts.GemmRate{}}
	for i, r := range w.Gemm {
		if r.Dtype == nil || r.Policy == nil || r.N == nil || r.Reps == nil || r.Ns == nil || r.Flops == nil {
			return nil, fmt.Errorf("ceilings: gemm[%d]: want dtype, policy, n, reps, ns and flops", i)
		}
		g.Gemm = append(g.Gemm, artifacts.GemmRate{Dtype: *r.Dtype, Policy: *r.Policy, N: *r.N, Reps: *r.Reps, Ns: *r.Ns, Flops: *r.Flops})
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

// GPUCase is one cuda case's floors from the session's GPU ceilings: its
// bytes at the device-to-device copy bandwidth, its flops at cuBLAS's rate
// for its dtype and policy, each divided by Slack. The copy runs from
// device memory; a working set that stays in the L2 can beat it, by less
// than Slack on the H200 (docs/gpu.md, "Ceilings").
func GPUCase(c oracle.Case, sig []oracle.Param, warmSets int, g *artifacts.GPUCeilings) artifacts.CaseFloor {
	f := artifacts.CaseFloor{Case: c.ID, Device: oracle.DeviceCUDA, Bytes: MinBytes(c, sig), WorkingSet: warmSets * ColdBytes(sig), Bandwidth: g.CopyBandwidth}
	if f.Bandwidth > 0 {
		f.MemoryNs = float64(f.Bytes) / f.Bandwidth * 1e9 / Slack
	}
	if f.Flops = Flops(c); f.Flops > 0 {
		if r := GemmFor(g, c.Dtype, c.Policy); r != nil {
			f.PeakFlops = r.Flops
			f.ComputeNs = f.Flops / f.PeakFlops * 1e9 / Slack
			kind := r.Dtype
			if r.Policy != "" {
				kind += " " + r.Policy
			}
			f.ISA = fmt.Sprintf("cuBLAS GemmEx %s %d^3 on %s", kind, r.N, g.Device)
		}
	}
	return f
}

// Fraction is how much of its ceiling a row reached: its binding floor
// (memory or compute, without the slack) over its time per call, and
// which ceiling that was; 0 and "" without a floor or a time.
func Fraction(f artifacts.CaseFloor, perCallNs float64) (float64, string) {
	if perCallNs <= 0 {
		return 0, ""
	}
	mem, comp := f.MemoryNs*Slack, f.ComputeNs*Slack
	switch {
	case comp > mem && comp > 0:
		return comp / perCallNs, "compute"
	case mem > 0:
		return mem / perCallNs, "memory"
	}
	return 0, ""
}
