package replay

import (
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// TestVisitFileL2: a GPU visit's file states the L2 policy once, after the
// kernel's lines; a CPU visit's never does (its timer refuses the key:
// prepare/harness TestVisitMalformed).
func TestVisitFileL2(t *testing.T) {
	e := &artifacts.Prepared{
		Inputs:  []artifacts.TensorRef{{Name: "A", Dtype: "f32", Shape: []int{2, 3}, Size: 24}},
		Outputs: []oracle.Param{{Name: "C", Role: "output", Dtype: "f32", Shape: []int{2, 3}}},
	}
	gpu := VisitFile(1, 3, 2, e, []string{"/visit/bin/kernel.cubin", "/visit/bin/launch.txt"}, artifacts.L2Flush, 32)
	want := "tilepipe-visit 3\nthreads 1\npool warm 3 4096\npool fresh 2 64\ncubin /visit/bin/kernel.cubin\nlaunch /visit/bin/launch.txt\nl2 flush\ngraph 32\nparam input A f32 24 5 6 2 3\nparam output C f32 24 7 8 2 3\n"
	if gpu != want {
		t.Errorf("GPU visit file =\n%s\nwant\n%s", gpu, want)
	}
	if cpu := VisitFile(1, 3, 2, e, nil, "", 0); strings.Contains(cpu, "l2") || strings.Contains(cpu, "graph") {
		t.Errorf("CPU visit file names an L2 policy:\n%s", cpu)
	}
}

// TestGraphBatch: a visit takes graph samples of config.graphBatch calls
// only for a GPU case whose entry's calls do not replay CUDA graphs of
// their own; the visit file and the drive both ask graphBatch, and the
// audit's records check holds the visit to the same predicate.
func TestGraphBatch(t *testing.T) {
	cfg := DefaultConfig
	cfg.GraphBatch = 32
	r := &replayer{cfg: cfg, cases: map[string]*artifacts.CapturedCase{
		"gpu": {Case: oracle.Case{ID: "gpu", Device: oracle.DeviceCUDA}},
		"cpu": {Case: oracle.Case{ID: "cpu"}},
	}}
	own := &artifacts.Prepared{OwnGraphs: "every call replays CUDA graphs of its own (a test)"}
	for _, tc := range []struct {
		c    string
		e    *artifacts.Prepared
		want int
	}{{"gpu", &artifacts.Prepared{}, 32}, {"gpu", own, 0}, {"cpu", &artifacts.Prepared{}, 0}, {"cpu", own, 0}} {
		if got := r.graphBatch(tc.c, tc.e); got != tc.want {
			t.Errorf("graphBatch(%s case, ownGraphs %q) = %d, want %d", tc.c, tc.e.OwnGraphs, got, tc.want)
		}
	}
	r.cfg.GraphBatch = 0
	if got := r.graphBatch("gpu", &artifacts.Prepared{}); got != 0 {
		t.Errorf("graphBatch without --graph-batch = %d, want 0", got)
	}
}
