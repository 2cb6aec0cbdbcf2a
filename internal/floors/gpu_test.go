package floors

import (
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

// ceilingsOut is what `cuda-timer --ceilings` printed on the H200 (the
// shape; numbers of that order).
const ceilingsOut = `{"device": "NVIDIA H200", "l2_bytes": 62914560, "copy_bytes": 2147483648, "copy_reps": 40, "copy_ns": 2.000000e+07, "copy_bandwidth": 4.294967e+12, "gemm": [` +
	`{"dtype": "f32", "policy": "strict", "n": 8192, "reps": 1, "ns": 2.2e+07, "flops": 4.997780e+13}, ` +
	`{"dtype": "f32", "policy": "tf32", "n": 8192, "reps": 6, "ns": 2.1e+07, "flops": 3.141462e+14}, ` +
	`{"dtype": "f16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "flops": 7.696581e+14}, ` +
	`{"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "flops": 7.696581e+14}], "gemm_error": ""}` + "\n"

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
		{"bandwidth forged whole", `"copy_reps": 40, "copy_ns": 2.000000e+07, "copy_bandwidth": 4.294967e+12`, `"copy_reps": 400, "copy_ns": 2.000000e+07, "copy_bandwidth": 4.294967e+13`, "ceilings: copy bandwidth 42.9 TB/s, above what any GPU delivers (30 TB/s)"},
		{"rate raised", `"flops": 7.696581e+14}], `, `"flops": 9.696581e+14}], `, "ceilings: gemm bf16 : 9.696581e+14 flop/s, but 8192^3 x 14 in 2e+07 ns is"},
		{"rate forged whole", `"reps": 14, "ns": 2e+07, "flops": 7.696581e+14}], `, `"reps": 1400, "ns": 2e+07, "flops": 7.696581e+16}], `, "ceilings: gemm bf16 : 76966 TFLOP/s, above what any GPU delivers (20000 TFLOP/s)"},
		{"rate dropped", `, {"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "flops": 7.696581e+14}]`, `]`, "ceilings: 3 gemm rates, want 4 (or fewer and gemm_error saying why)"},
		{"rates swapped", `"dtype": "f16"`, `"dtype": "bf16"`, `ceilings: gemm[2] is bf16 "", want f16 ""`},
		{"no device", `"device": "NVIDIA H200"`, `"device": ""`, "ceilings: no device name"},
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
	partial := strings.Replace(strings.Replace(ceilingsOut, `, {"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 2e+07, "flops": 7.696581e+14}]`, `]`, 1),
		`"gemm_error": ""`, `"gemm_error": "cublasGemmEx bf16 : status 15"`, 1)
	if g, err := ParseCeilings([]byte(partial)); err != nil || GemmFor(g, "bf16", "") != nil {
		t.Errorf("ParseCeilings(3 rates and a gemm_error) = %v, %v; want accepted without a bf16 rate", g, err)
	}
}

// TestGPUCase: a cuda case's floors are its bytes at the copy bandwidth
// and its flops at its dtype's rate, each halved; the fraction of ceiling
// is the binding one without the slack.
func TestGPUCase(t *testing.T) {
	g, err := ParseCeilings([]byte(ceilingsOut))
	if err != nil {
		t.Fatal(err)
	}
	gemm := oracle.Case{ID: "g", Op: "gemm", Dims: map[string]int{"M": 1024, "N": 1024, "K": 1024}, Dtype: "bf16", Policy: "strict", Pattern: "normal", Device: "cuda"}
	sig, err := oracle.Signature(gemm)
	if err != nil {
		t.Fatal(err)
	}
	f := GPUCase(gemm, sig, 3, g)
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
	fa := GPUCase(add, asig, 3, g)
	if fa.Flops != 0 || fa.ComputeNs != 0 {
		t.Errorf("add's compute floor = %+v, want none", fa)
	}
	// 48 MiB in 14.8 µs: 3.4 TB/s of 4.29.
	if frac, what := Fraction(fa, 14800); what != "memory" || frac < 0.78 || frac > 0.8 {
		t.Errorf("Fraction(add) = %g %s, want about 0.79 memory", frac, what)
	}
}
