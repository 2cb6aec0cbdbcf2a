package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/compare"
)

// TestCompareCheckpoints: compare --old --new matches rows by case digest
// and route. A checkpoint against itself matches every timed row at a
// geometric mean of exactly 1; against a run whose add case has another
// seed (the same case id), that case is listed as differing on both
// sides, never paired, and the other rows are matched with an interval.
// A checkpoint changed on disk is refused.
func TestCompareCheckpoints(t *testing.T) {
	long(t)
	cases := gemm16 + `, {"op": "sum", "dims": {"M": 4, "N": 33}, "seed": 5}, {"op": "softmax", "dims": {"M": 4, "N": 40}, "seed": 6},
		{"op": "rmsnorm", "dims": {"M": 3, "N": 33}, "seed": 7}, {"op": "layernorm", "dims": {"M": 3, "N": 35}, "seed": 8}, {"op": "gemm", "dims": {"M": 8, "N": 8, "K": 8}, "seed": 9}`
	old, code, out, errs := naiveRun(t, tinyCohort(t, cases+", "+add3x7), "1")
	if code != exitOK {
		t.Fatalf("old run = exit %d:\n%s%s", code, out, errs)
	}
	nw, code, out, errs := naiveRun(t, tinyCohort(t, cases+`, {"op": "add", "dims": {"M": 3, "N": 7}, "seed": 4}`), "1")
	if code != exitOK {
		t.Fatalf("new run = exit %d:\n%s%s", code, out, errs)
	}
	run := func(a, b string) *compare.Result {
		t.Helper()
		code, out, errs := tp(t, "compare", "--old", a, "--new", b, "--json")
		if code != exitOK {
			t.Fatalf("compare = exit %d:\n%s%s", code, out, errs)
		}
		var r compare.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("compare --json: %v\n%s", err, out)
		}
		return &r
	}
	self := run(old, old)
	if len(self.Matched) != 7 || len(self.Unmatched) != 0 || self.GeoMean != 1 || !self.Interval || self.Lo != 1 || self.Hi != 1 {
		t.Errorf("old against itself: %d matched, %d not, geomean %g [%g, %g]: want 7, 0, exactly 1", len(self.Matched), len(self.Unmatched), self.GeoMean, self.Lo, self.Hi)
	}
	r := run(old, nw)
	if len(r.Matched) != 6 || !r.Interval || r.Lo > r.GeoMean || r.Hi < r.GeoMean {
		t.Errorf("old against new: %d matched, geomean %g [%g, %g] (interval %v): want 6 matched and an interval around the mean", len(r.Matched), r.GeoMean, r.Lo, r.Hi, r.Interval)
	}
	for _, m := range r.Matched {
		if m.Case == "add-3x7" {
			t.Errorf("add-3x7 of another seed was paired: %+v", m)
		}
	}
	if len(r.Unmatched) != 2 || !strings.HasPrefix(r.Unmatched[0].Reason, "case add-3x7 differs: its specification or oracle version in the ") ||
		!strings.HasPrefix(r.Unmatched[1].Reason, "case add-3x7 differs: its specification or oracle version in the ") || r.Unmatched[0].Reason == r.Unmatched[1].Reason {
		t.Errorf("not compared %+v: want add-3x7 of each side, each naming the other's digest", r.Unmatched)
	}
	code, md, _ := tp(t, "compare", "--old", old, "--new", nw)
	if code != exitOK || !strings.Contains(md, "Geometric mean of new/old over 6 matched rows: ") || !strings.Contains(md, "## not compared (2)") {
		t.Errorf("compare = exit %d:\n%s", code, md)
	}

	forged := copyRun(t, nw)
	flipByte(t, layerPath(t, filepath.Join(forged, "replay"), artifacts.ReplayType, artifacts.DocTitle))
	if code, _, errs := tp(t, "compare", "--old", old, "--new", forged); code != exitFailure || !strings.Contains(errs, "digest mismatch") {
		t.Errorf("compare of a tampered checkpoint = exit %d, %q; want 1 and a digest mismatch", code, errs)
	}
	// The two runs also give report an audit stage of another replay,
	// which it refuses rather than show another audit's verdict.
	mixed := copyRun(t, nw)
	if out, err := exec.Command("sh", "-c", `chmod -R u+w "$1" && rm -rf "$1" && cp -a "$2" "$1"`, "sh", filepath.Join(mixed, "audit"), filepath.Join(old, "audit")).CombinedOutput(); err != nil {
		t.Fatalf("swap audit stages: %v %s", err, out)
	}
	code, _, errs = tp(t, "report", "--checkpoint", mixed, "--output", filepath.Join(t.TempDir(), "r.html"))
	if want := "its subject is not the replay manifest " + openStage(t, filepath.Join(nw, "replay"), artifacts.ReplayType).Descriptor.Digest.String() + ": the audit of another replay"; code != exitFailure || !strings.Contains(errs, want) {
		t.Errorf("report with another replay's audit = exit %d, %q; want 1 and %q", code, errs, want)
	}
	if code, _, errs := tp(t, "compare", "--old", old); code != exitUsage || !strings.Contains(errs, "--new is required") {
		t.Errorf("compare --old alone = exit %d, %q; want usage", code, errs)
	}
}
