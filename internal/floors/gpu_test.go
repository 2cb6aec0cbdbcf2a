package floors

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

// ceilingsOut is what `cuda-timer --ceilings` printed on the H200 (the
// shape; numbers of that order).
const ceilingsOut = `{"device": "NVIDIA H200", "l2_bytes": 62914560, "copy_bytes": 2147483648, "copy_reps": 40, "copy_ns": 2.000000e+07, "copy_worst_ns": 2.02e+07, "copy_bandwidth": 4.294967e+12, "gemm": [` +
	`{"dtype": "f32", "policy": "strict", "n": 8192, "reps": 1, "ns": 2.2e+07, "worst_ns": 2.233e+07, "flops": 4.997780e+13}, ` +
	`{"dtype": "f32", "policy": "tf32", "n": 8192, "reps": 6, "ns": 2.1e+07, "worst_ns": 2.12e+07, "flops": 3.141462e+14}, ` +
	`{"dtype": "f16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "worst_ns": 2.04e+07, "flops": 7.696581e+14}, ` +
	`{"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "worst_ns": 2.06e+07, "flops": 7.696581e+14}], "gemm_error": ""}` + "\n"

// TestParseCeilings: the timer's answer is read key for key, and every
// way of lowering the GPU floors by editing it is refused with the reason.
func TestParseCeilings(t *testing.T) {
	g, err := ParseCeilings([]byte(ceilingsOut))
	if err != nil {
		t.Fatal(err)
	}
	if g.Device != "NVIDIA H200" || g.CopyBandwidth != 4.294967e12 || len(g.Gemm) != 4 || GemmFor(g, "bf16", "").Flops != 7.696581e14 {
		t.Fatalf("ParseCeilings = %+v", g)
	}
	if r := GemmFor(g, "", ""); r == nil || r.Policy != "strict" {
		t.Errorf("GemmFor(f32, no policy) = %+v, want the strict rate", r)
	}
	if r := GemmFor(g, "f32", "tf32"); r == nil || r.Policy != "tf32" {
		t.Errorf("GemmFor(f32, tf32) = %+v, want the tf32 rate", r)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"extra key", `"gemm_error": ""`, `"gemm_error": "", "bonus": 1`, `ceilings: json: unknown field "bonus"`},
		{"missing key", `"l2_bytes": 62914560, `, ``, "ceilings: want device, l2_bytes,"},
		{"trailing data", "}\n", "} {}\n", "ceilings: data after the object"},
		{"bandwidth raised", `"copy_bandwidth": 4.294967e+12`, `"copy_bandwidth": 8.589934e+12`, "ceilings: copy bandwidth 8.589934e+12 B/s, but 2147483648 bytes x 40 in 2e+07 ns is 4.294967296e+12"},
		{"bandwidth forged whole", `"copy_reps": 40, "copy_ns": 2.000000e+07, "copy_worst_ns": 2.02e+07, "copy_bandwidth": 4.294967e+12`, `"copy_reps": 400, "copy_ns": 2.000000e+07, "copy_worst_ns": 2.02e+07, "copy_bandwidth": 4.294967e+13`, "ceilings: copy bandwidth 42.9 TB/s, above what any GPU delivers (30 TB/s)"},
		{"rate raised", `"flops": 7.696581e+14}], `, `"flops": 9.696581e+14}], `, "ceilings: gemm bf16 : 9.696581e+14 flop/s, but 8192^3 x 14 in 2e+07 ns is"},
		{"rate forged whole", `"reps": 14, "ns": 2e+07, "worst_ns": 2.06e+07, "flops": 7.696581e+14}], `, `"reps": 1400, "ns": 2e+07, "worst_ns": 2.06e+07, "flops": 7.696581e+16}], `, "ceilings: gemm bf16 : 76966 TFLOP/s, above what any GPU delivers (20000 TFLOP/s)"},
		{"rate dropped", `, {"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "worst_ns": 2.06e+07, "flops": 7.696581e+14}]`, `]`, "ceilings: 3 gemm rates, want 4 (or fewer and gemm_error saying why)"},
		{"rates swapped", `"dtype": "f16"`, `"dtype": "bf16"`, `ceilings: gemm[2] is bf16 "", want f16 ""`},
		{"no device", `"device": "NVIDIA H200"`, `"device": ""`, "ceilings: no device name"},
		{"no spread", `"copy_worst_ns": 2.02e+07, `, ``, "ceilings: want device, l2_bytes, copy_bytes, copy_reps, copy_ns, copy_worst_ns,"},
		{"no rate spread", `"worst_ns": 2.12e+07, `, ``, "ceilings: gemm[1]: want dtype, policy, n, reps, ns, worst_ns and flops"},
		{"spread zero", `"copy_worst_ns": 2.02e+07`, `"copy_worst_ns": 0`, "ceilings: copy_worst_ns 0: want the slowest of the copy's timed runs"},
		{"slowest run faster than the best", `"copy_worst_ns": 2.02e+07`, `"copy_worst_ns": 1.9e+07`, "ceilings: copy's slowest run 1.9e+07 ns, faster than its best 2e+07 ns"},
		{"rate's slowest run faster", `"worst_ns": 2.04e+07`, `"worst_ns": 1e+07`, "ceilings: gemm f16 : slowest run 1e+07 ns, faster than its best 2e+07 ns"},
		{"negative time", `"copy_ns": 2.000000e+07`, `"copy_ns": -2`, "ceilings: copy of 2147483648 bytes, 40 reps in -2 ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(ceilingsOut, tc.old, tc.new, 1)
			if in == ceilingsOut {
				t.Fatalf("edit %q not applied", tc.old)
			}
			_, err := ParseCeilings([]byte(in))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("ParseCeilings(%s) = %v, want %q", tc.name, err, tc.want)
			}
		})
	}
	// Fewer rates with the reason: accepted, no compute floor for the rest.
	partial := strings.Replace(strings.Replace(ceilingsOut, `, {"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "worst_ns": 2.06e+07, "flops": 7.696581e+14}]`, `]`, 1),
		`"gemm_error": ""`, `"gemm_error": "cublasGemmEx bf16 : status 15"`, 1)
	if g, err := ParseCeilings([]byte(partial)); err != nil || GemmFor(g, "bf16", "") != nil {
		t.Errorf("ParseCeilings(3 rates and a gemm_error) = %v, %v; want accepted without a bf16 rate", g, err)
	}
}

// TestGPUSlack: a slack from a ceiling's spread, GPUMargin at none, at
// most Slack; Slack for a ceiling that kept none.
func TestGPUSlack(t *testing.T) {
	for _, tc := range []struct{ best, worst, want float64 }{
		{2e7, 2e7, GPUMargin},
		{2e7, 2.02e7, 1.111},
		{2e7, 2.2e7, 1.21},
		{2e7, 5e7, Slack},
		{2e7, 0, Slack},
		{0, 2e7, Slack},
	} {
		if got := GPUSlack(tc.best, tc.worst); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("GPUSlack(%g, %g) = %g, want %g", tc.best, tc.worst, got, tc.want)
		}
	}
}

// TestGPUCase: a cuda case's floors are its bytes beyond twice the L2 at
// the copy bandwidth and its flops at its dtype's rate, each divided by
// the slack its ceiling's spread gives; from ceilings that kept no
// spread, every byte, each halved. The fraction of ceiling people read
// charges every byte without the slack.
func TestGPUCase(t *testing.T) {
	old, err := ParseCeilings([]byte(ceilingsOut))
	if err != nil {
		t.Fatal(err)
	}
	// Ceilings recorded before they kept their spread.
	g := *old
	g.CopyWorstNs = 0
	g.Gemm = slices.Clone(old.Gemm)
	for i := range g.Gemm {
		g.Gemm[i].WorstNs = 0
	}
	if err := CheckCeilings(&g); err != nil {
		t.Fatal(err)
	}
	mixed := g
	mixed.CopyWorstNs = 2.02e7
	if err := CheckCeilings(&mixed); err == nil || err.Error() != "ceilings: gemm f32 strict: slowest run 0 ns beside the copy's 2.02e+07: want the spread of every ceiling or of none" {
		t.Errorf("CheckCeilings(the copy's spread and no rate's) = %v", err)
	}
	gemm := oracle.Case{ID: "g", Op: "gemm", Dims: map[string]int{"M": 1024, "N": 1024, "K": 1024}, Dtype: "bf16", Policy: "strict", Pattern: "normal", Device: "cuda"}
	sig, err := oracle.Signature(gemm)
	if err != nil {
		t.Fatal(err)
	}
	f := GPUCase(gemm, sig, 3, &g)
	wantBytes := 3 * 1024 * 1024 * 2
	if f.Bytes != wantBytes || f.WorkingSet != 3*wantBytes || f.Bandwidth != g.CopyBandwidth {
		t.Errorf("GPUCase bytes %d working set %d bandwidth %g", f.Bytes, f.WorkingSet, f.Bandwidth)
	}
	if want := float64(wantBytes) / g.CopyBandwidth * 1e9 / Slack; !near(f.MemoryNs, want) {
		t.Errorf("memory floor %g ns, want %g", f.MemoryNs, want)
	}
	if want := 2 * 1024.0 * 1024 * 1024 / 7.696581e14 * 1e9 / Slack; f.PeakFlops != 7.696581e14 || !near(f.ComputeNs, want) || f.ISA != "cuBLAS GemmEx bf16 8192^3 on NVIDIA H200" {
		t.Errorf("compute floor %g ns at %g (%s), want %g", f.ComputeNs, f.PeakFlops, f.ISA, want)
	}
	// 1024^3 bf16 at 7.37 µs per call is about 38% of the cuBLAS rate.
	if frac, what := Fraction(f, 7370); what != "compute" || frac < 0.37 || frac > 0.39 {
		t.Errorf("Fraction = %g %s, want about 0.38 compute", frac, what)
	}
	if why := Below(f, f.ComputeNs*0.9); !strings.HasPrefix(why, "below_physical_floor: ") || !strings.Contains(why, "cuBLAS GemmEx bf16 8192^3 on NVIDIA H200") {
		t.Errorf("Below(a row faster than its GPU floor) = %q", why)
	}
	add := oracle.Case{ID: "a", Op: "add", Dims: map[string]int{"M": 2048, "N": 2048}, Dtype: "f32", Policy: "strict", Pattern: "normal", Device: "cuda"}
	asig, err := oracle.Signature(add)
	if err != nil {
		t.Fatal(err)
	}
	fa := GPUCase(add, asig, 3, &g)
	if fa.Flops != 0 || fa.ComputeNs != 0 {
		t.Errorf("add's compute floor = %+v, want none", fa)
	}
	// 48 MiB in 14.8 µs: 3.4 TB/s of 4.29.
	if frac, what := Fraction(fa, 14800); what != "memory" || frac < 0.78 || frac > 0.8 {
		t.Errorf("Fraction(add) = %g %s, want about 0.79 memory", frac, what)
	}
	if want := "below_physical_floor: fastest sample 5000 ns per call, memory floor 5859 ns (50331648 bytes at 4295.0 GB/s for a 150994944-byte working set, slack 2)"; Below(fa, 5000) != want {
		t.Errorf("Below(add, old ceilings) = %q, want %q", Below(fa, 5000), want)
	}

	// Ceilings that keep their spread: the copy's 1% gives 1.111, the bf16
	// rate's 3% 1.133; 1024^3 bf16 is 6 MiB, within twice the 60 MiB L2,
	// so no memory floor.
	f = GPUCase(gemm, sig, 3, old)
	if f.L2Bytes != 62914560 || f.MemorySlack != 1.111 || !near(f.ComputeSlack, 1.133) || f.MemoryNs != 0 {
		t.Errorf("GPUCase(gemm, spread) = %+v, want L2 62914560, slacks 1.111 and 1.133, no memory floor", f)
	}
	if want := 2 * 1024.0 * 1024 * 1024 / 7.696581e14 * 1e9 / 1.133; !near(f.ComputeNs, want) {
		t.Errorf("compute floor %g ns, want %g", f.ComputeNs, want)
	}
	if frac, what := AboveCeiling(f, f.ComputeNs); what != "compute" || !near(frac, 1.133) {
		t.Errorf("AboveCeiling(at the floor) = %g %s, want 1.133 compute", frac, what)
	}
	// add 8192x4096 f32: 384 MiB, 264 MiB of it beyond twice the L2.
	big := oracle.Case{ID: "b", Op: "add", Dims: map[string]int{"M": 8192, "N": 4096}, Dtype: "f32", Policy: "strict", Pattern: "normal", Device: "cuda"}
	bsig, err := oracle.Signature(big)
	if err != nil {
		t.Fatal(err)
	}
	fb := GPUCase(big, bsig, 3, old)
	if want := float64(3*8192*4096*4-2*62914560) / old.CopyBandwidth * 1e9 / 1.111; Charged(fb) != 3*8192*4096*4-2*62914560 || !near(fb.MemoryNs, want) {
		t.Errorf("GPUCase(add 8192x4096) memory floor %g ns charging %d bytes, want %g", fb.MemoryNs, Charged(fb), want)
	}
	if want := "below_physical_floor: fastest sample 50000 ns per call, memory floor 58014 ns (276824064 of 402653184 bytes beyond twice the 62914560-byte L2 at 4295.0 GB/s for a 1207959552-byte working set, slack 1.111)"; Below(fb, 50000) != want {
		t.Errorf("Below(add 8192x4096) = %q, want %q", Below(fb, 50000), want)
	}
	// The table's fraction charges every byte: an L2-resident add may
	// show more than 100% of memory, and its floor allows it.
	fs := GPUCase(add, asig, 3, old)
	if frac, _ := Fraction(fs, 9000); frac < 1.3 || frac > 1.31 {
		t.Errorf("Fraction(add in the L2) = %g, want about 1.30", frac)
	}
	if frac, _ := AboveCeiling(fs, 9000); frac != 0 {
		t.Errorf("AboveCeiling(add in the L2) = %g, want 0", frac)
	}
}
