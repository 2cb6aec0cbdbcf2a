package replay

import (
	"errors"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

func TestCheckCPU(t *testing.T) {
	doc := func(builds ...artifacts.Build) artifacts.CaptureDoc {
		return artifacts.CaptureDoc{Cases: []artifacts.CapturedCase{
			{Case: oracle.Case{ID: "gemm-64"}, Builds: builds},
			{Case: oracle.Case{ID: "add-4x10"}, Builds: builds},
		}}
	}
	built := func(route string, flags ...string) artifacts.Build {
		return artifacts.Build{Route: route, Status: artifacts.StatusBuilt, RequiresCPU: flags}
	}
	here := func() ([]string, error) { return []string{"avx2", "fma", "sse2"}, nil }
	unreadable := func() ([]string, error) { return nil, errors.New("open /proc/cpuinfo: no such file or directory") }
	for _, tc := range []struct {
		name  string
		doc   artifacts.CaptureDoc
		flags func() ([]string, error)
		want  string
	}{
		{"nothing required", doc(built("halide")), unreadable, ""},
		{"subset", doc(built("orc", "avx2", "fma"), built("halide")), here, ""},
		{"missing", doc(built("halide"), built("orc", "avx2", "avx512f", "avx512f")), here,
			"replay: case gemm-64 route orc: built for CPU features [avx512f] that this CPU lacks (/proc/cpuinfo flags) (and 1 more builds)"},
		{"a failed build is not timed", doc(artifacts.Build{Route: "orc", Status: artifacts.StatusFailed, RequiresCPU: []string{"amx_tile"}}), here, ""},
		{"unreadable flags", doc(built("orc", "avx2")), unreadable,
			"replay: case gemm-64 route orc: built for CPU features [avx2], but this CPU's flags cannot be read: open /proc/cpuinfo: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCPU(tc.doc, tc.flags)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("checkCPU = %q, want %q", got, tc.want)
			}
		})
	}
	one := artifacts.CaptureDoc{Cases: []artifacts.CapturedCase{{Case: oracle.Case{ID: "gemm-64"}, Builds: []artifacts.Build{built("orc", "avx512f")}}}}
	want := "replay: case gemm-64 route orc: built for CPU features [avx512f] that this CPU lacks (/proc/cpuinfo flags)"
	if err := checkCPU(one, here); err == nil || err.Error() != want {
		t.Errorf("checkCPU = %v, want %q", err, want)
	}
}
