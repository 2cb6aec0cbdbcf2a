package compare

import (
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/internal/golden"
)

// TestMarkdownGolden: tilepipe compare's table as a reader sees it: the
// committed GPU checkpoint against itself (every timed row matched at
// 1.000, the unsupported rows not compared), then hand-made results for
// the interval, the too-few-rows and the nothing-matched branches.
func TestMarkdownGolden(t *testing.T) {
	const dir = "../testdata/gpu-checkpoint"
	self, err := Run(dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(n int) []Row {
		var out []Row
		for i := range n {
			out = append(out, Row{Case: "add-" + strings.Repeat("x", i+1), Digest: "d", Route: "halide", OldNs: 1000 + float64(i), NewNs: 900 + float64(i), Ratio: (900 + float64(i)) / (1000 + float64(i))})
		}
		return out
	}
	side := func(name string) Side { return Side{Dir: name, Replay: "sha256:" + strings.Repeat(name[:1], 64)} }
	var b strings.Builder
	for _, r := range []*Result{
		self,
		{Old: side("old"), New: side("new"), Matched: rows(MinRows), GeoMean: 0.9, Lo: 0.89, Hi: 0.91, Interval: true,
			Unmatched: []Row{{Case: "gemm-16", Route: "orc", Reason: "timed in old | failed in new"}}},
		{Old: side("old"), New: side("new"), Matched: rows(2), GeoMean: 0.9},
		{Old: side("old"), New: side("new")},
	} {
		b.WriteString(Markdown(r))
		b.WriteString("\n----\n\n")
	}
	golden.Check(t, "compare.md", []byte(b.String()))
}
