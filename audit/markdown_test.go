package audit

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/tilepipe/tilepipe/internal/golden"
)

// TestMarkdownGolden: audit.md as a reviewer reads it, from fixed reports:
// the committed GPU checkpoint's audit (testdata/gpu-checkpoint-audit.json,
// written by tilepipe audit of testdata/gpu-checkpoint) and a hand-made
// broken one (pinned, signed, failed visits, a failed check).
func TestMarkdownGolden(t *testing.T) {
	f, err := os.Open("testdata/gpu-checkpoint-audit.json") // the statement's predicate
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "gpu-checkpoint-audit.md", []byte(Markdown(&r)))

	broken := Report{
		Verdict: "fail", Integrity: "broken",
		Claims:   Claims{Supported: 1, Unsupported: 2},
		Pinned:   true,
		Expected: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Signed:   "signed by trusted key 3f2a",
		FailedVisits: []FailedVisit{
			{Visit: 4, Round: 1, Case: "gemm-16", Route: "halide", Reason: "oracle: warm set 0: bound | exceeded"},
		},
		Checks: []Check{
			{Name: "blobs", Status: "FAILED", Summary: "blob cases/x (path): digest mismatch"},
			{Name: "balance", Status: "WARNED", Summary: "2 visits in 1 round"},
		},
		Rows: []Row{
			{Case: "gemm-16", Route: "halide", Status: "failed", Why: "a visit failed", Marks: []string{"no sandbox"}},
			{Case: "gemm-16", Route: "naive", Status: "passed", Supported: true},
			{Case: "gemm-16", Route: "orc", Status: "passed", Supported: true, Ratio: &RowRatio{Baseline: "naive", Median: 0.5, Lo: 0.45, Hi: 0.55}},
		},
	}
	golden.Check(t, "broken-audit.md", []byte(Markdown(&broken)))
}
