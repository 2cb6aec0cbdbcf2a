package audit

import (
	"reflect"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/oracle"
)

func TestClockAgrees(t *testing.T) {
	tests := []struct {
		name     string
		recorded []float64
		mine     float64
		p, w     []string
	}{
		{"the same machine", []float64{3.0e9, 3.1e9}, 3.0e9, nil, nil},
		{"up to 1.25x", []float64{3.75e9}, 3.0e9, nil, nil},
		{"a faster machine", []float64{4.5e9}, 3.0e9, nil, []string{"session 0: recorded clock 4.50 GHz, 1.50x this machine's 3.00 GHz: machines differ or the clock was forged"}},
		{"twice, as this machine's own clock reads from run to run", []float64{3.66e9}, 1.83e9, nil, []string{"session 0: recorded clock 3.66 GHz, 2.00x this machine's 1.83 GHz: machines differ or the clock was forged"}},
		{"more than 3x", []float64{3e9, 6.3e9}, 2.0e9, []string{"session 1: recorded clock 6.30 GHz, more than 3x this machine's 2.00 GHz: a higher clock lowers every compute floor"}, []string{"session 0: recorded clock 3.00 GHz, 1.50x this machine's 2.00 GHz: machines differ or the clock was forged"}},
		{"above any CPU", []float64{7e9}, 5e9, []string{"session 0: recorded clock 7.00 GHz, above what any CPU sustains (6.5 GHz); this machine measures 5.00 GHz"}, nil},
		{"a slower replay machine", []float64{1e9}, 5e9, nil, nil},
	}
	for _, tt := range tests {
		p, w := clockAgrees(tt.recorded, tt.mine)
		if !reflect.DeepEqual(p, tt.p) || !reflect.DeepEqual(w, tt.w) {
			t.Errorf("clockAgrees(%s) = %q, %q; want %q, %q", tt.name, p, w, tt.p, tt.w)
		}
	}
}

func TestFlagsAgree(t *testing.T) {
	mine := []string{"avx", "avx2", "fma", "sse2"}
	if w := flagsAgree([]string{"avx2", "fma", "sse4_2"}, mine); w != nil {
		t.Errorf("flagsAgree(a subset, and a non-vector flag) = %q, want none", w)
	}
	want := []string{
		"the replay's CPU flags include avx512f, which this machine lacks: the compute floors assume it (machines differ or the flags were forged)",
		"the replay's CPU flags include amx_bf16, which this machine lacks: the compute floors assume it (machines differ or the flags were forged)",
	}
	if w := flagsAgree([]string{"amx_bf16", "avx2", "avx512f"}, mine); !reflect.DeepEqual(w, want) {
		t.Errorf("flagsAgree(avx512f, amx_bf16) = %q, want %q", w, want)
	}
	if got := vectorFlags([]string{"sse2", "fma", "avx2"}); got != "avx2 fma" {
		t.Errorf("vectorFlags = %q, want avx2 fma", got)
	}
}

// TestAboveCeiling: a passed GPU row faster than its binding ceiling (but
// not below its floor, the ceiling over the slack) is named with the
// fraction and the ceiling; one within its ceiling, and a CPU row, are not.
func TestAboveCeiling(t *testing.T) {
	mem := artifacts.CaseFloor{Case: "add", Device: oracle.DeviceCUDA, Bytes: 12 << 20, Bandwidth: 4e12, MemoryNs: float64(12<<20) / 4e12 * 1e9 / floors.Slack}
	comp := artifacts.CaseFloor{Case: "gemm", Device: oracle.DeviceCUDA, Bytes: 12 << 20, Bandwidth: 4e12, MemoryNs: float64(12<<20) / 4e12 * 1e9 / floors.Slack,
		Flops: 2 << 30, PeakFlops: 50e12, ComputeNs: float64(2<<30) / 50e12 * 1e9 / floors.Slack, ISA: "cuBLAS GemmEx f32 strict 8192^3 on NVIDIA H200"}
	row := func(c string, minNs float64) artifacts.Summary {
		return artifacts.Summary{Case: c, Route: "r", Status: artifacts.StatusPassed, MinNs: minNs}
	}
	for _, tc := range []struct {
		name string
		f    artifacts.CaseFloor
		s    artifacts.Summary
		want string
	}{
		// 12 MiB at 4 TB/s is 3146 ns: 2500 ns is 126% of it.
		{"memory", mem, row("add", 2500), "add/r: fastest sample 2500 ns per call is 126% of its memory ceiling, 4.00 TB/s copy bandwidth measured by its session: faster than the GPU measured possible (a ceiling measured low, a clock, or calls that did less)"},
		// 2^31 flop at 50 TFLOP/s is 42950 ns: 35000 ns is 123% of it.
		{"compute", comp, row("gemm", 35000), "gemm/r: fastest sample 35000 ns per call is 123% of its compute ceiling, 50 TFLOP/s (cuBLAS GemmEx f32 strict 8192^3 on NVIDIA H200) measured by its session: faster than the GPU measured possible (a ceiling measured low, a clock, or calls that did less)"},
		{"within", comp, row("gemm", 43000), ""},
		// From ceilings that keep their spread, 12 MiB is within twice the
		// L2: the cache may hold all of it, so no memory ceiling binds
		// (the table's fraction, every byte at 4 TB/s, reads 126%).
		{"in the L2", artifacts.CaseFloor{Case: "add", Device: oracle.DeviceCUDA, Bytes: 12 << 20, Bandwidth: 4e12, L2Bytes: 62914560, MemorySlack: 1.111}, row("add", 2500), ""},
		{"a CPU row", artifacts.CaseFloor{Case: "add", Bytes: 12 << 20, Bandwidth: 4e12, MemoryNs: mem.MemoryNs}, row("add", 2500), ""},
	} {
		if got := aboveCeiling(tc.f, tc.s); got != tc.want {
			t.Errorf("%s: aboveCeiling =\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}

// TestIdleProbes: a passed GPU visit's idle probes must all be within
// telemetry.BusyNs and number two a sample at least, and one more a
// staged novel sample (novel rule 3: the probe that ends its span); a
// visit without any (the CPU, a replay made before the probe) is not
// judged.
func TestIdleProbes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		g            *artifacts.GPUIdle
		rows, staged int
		want         string
	}{
		{"none recorded", nil, 40, 0, ""},
		{"idle", &artifacts.GPUIdle{Probes: 96, WorstNs: 37800}, 40, 0, ""},
		{"busy, yet passed", &artifacts.GPUIdle{Probes: 96, WorstNs: 2384600}, 40, 0, "idle probe of 2384 us, above 500 us: the GPU ran work of the visit outside its samples, and the visit passed"},
		{"too few", &artifacts.GPUIdle{Probes: 79, WorstNs: 9000}, 40, 0, "79 idle probes for 40 samples: want one before and one after every sample"},
		{"no time", &artifacts.GPUIdle{Probes: 96}, 40, 0, "96 idle probes, the slowest 0 ns: want each probe's time"},
		{"staged", &artifacts.GPUIdle{Probes: 90, WorstNs: 9000}, 40, 10, ""},
		{"a staged span's probe missing", &artifacts.GPUIdle{Probes: 89, WorstNs: 9000}, 40, 10,
			"89 idle probes for 40 samples, 10 of them staged: want one before and one after every sample, and one at the end of every staged sample's span"},
	} {
		if got := idleProbes(tc.g, tc.rows, tc.staged); got != tc.want {
			t.Errorf("%s: idleProbes = %q, want %q", tc.name, got, tc.want)
		}
	}
}
