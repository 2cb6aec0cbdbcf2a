package adaptive

import (
	"reflect"
	"testing"
)

// TestDecide feeds the rule each way a case can stand at a boundary.
func TestDecide(t *testing.T) {
	narrow := Row{Route: "r", Ratio: true, Median: 0.5, Lo: 0.495, Hi: 0.507, Exact: true, SpentNs: 1e9}
	wide := Row{Route: "s", Ratio: true, Median: 0.5, Lo: 0.49, Hi: 0.52, Exact: true, SpentNs: 1e9}
	few := Row{Route: "s", Ratio: true, Median: 0.5, Lo: 0.499, Hi: 0.501, Exact: false, SpentNs: 1e9}
	base := Row{Route: "b", SpentNs: 1e9}
	spent := base
	spent.SpentNs = 60e9
	for _, tc := range []struct {
		name string
		rows []Row
		want string
	}{
		{"only the baseline", []Row{base}, StopNoRatio},
		{"every ratio within target", []Row{narrow, base}, StopTarget},
		{"one ratio wide", []Row{narrow, wide, base}, ""},
		{"too few rounds for an interval", []Row{few, base}, ""},
		{"wide, the baseline's budget spent", []Row{wide, spent}, StopBudget},
		{"within target and budget spent", []Row{narrow, spent}, StopTarget},
	} {
		if got := Decide(tc.rows, 0.015, 60e9); got != tc.want {
			t.Errorf("%s: Decide = %q, want %q", tc.name, got, tc.want)
		}
	}
	// The target is inclusive, relative to the median, on both sides.
	if !Reached(1, 0.985, 1.015, true, 0.015) || Reached(1, 0.984, 1.0, true, 0.015) || Reached(1, 1, 1.0151, true, 0.015) || Reached(1, 1, 1, false, 0.015) {
		t.Error("Reached: want [0.985, 1.015] within ±1.5% of 1 and nothing wider or without an exact interval")
	}
	if p := Precision(0.5, 0.49, 0.52, true); p < 0.04-1e-12 || p > 0.04+1e-12 {
		t.Errorf("Precision = %g, want 0.04 (the larger half-width)", p)
	}
	for _, tc := range []struct {
		r    int
		want bool
	}{{5, false}, {6, true}, {7, false}, {8, true}, {10, true}} {
		if got := Boundary(tc.r, 6, 2); got != tc.want {
			t.Errorf("Boundary(%d, 6, 2) = %v, want %v", tc.r, got, tc.want)
		}
	}
}

// TestShare: a replay budget lets the cases that would go on do so while
// what is left pays for each one's next block, the neediest first; the
// rule of each case alone comes first, and no budget changes nothing.
func TestShare(t *testing.T) {
	wide := func(route string, lo, hi float64) Row {
		return Row{Route: route, Ratio: true, Median: 1, Lo: lo, Hi: hi, Exact: true, SpentNs: 1e9}
	}
	inexact := Row{Route: "r", Ratio: true, Median: 1, Lo: 0.9, Hi: 1.1, SpentNs: 1e9}
	base := Row{Route: "b", SpentNs: 1e9}
	two := []string{"r", "b"}
	cases := []Case{
		{ID: "far", Rows: []Row{wide("r", 0.9, 1.1), base}, Routes: two},      // ±10%
		{ID: "near", Rows: []Row{wide("r", 0.98, 1.02), base}, Routes: two},   // ±2%
		{ID: "none", Rows: []Row{inexact, base}, Routes: two},                 // no interval yet
		{ID: "done", Rows: []Row{wide("r", 0.995, 1.005), base}, Routes: two}, // ±0.5%: target reached
		{ID: "dear", Rows: []Row{wide("r", 0.97, 1.03), base}, Routes: []string{"r", "b", "c"}},
	}
	mean := map[string]float64{"r": 1e9, "b": 2e9, "c": 10e9} // a block of 2 rounds: 6 s for r and b, 26 s with c
	for _, tc := range []struct {
		name string
		b    Budget
		want map[string]string
	}{
		{"no replay budget", Budget{}, map[string]string{"done": StopTarget}},
		{"room for all", Budget{TotalNs: 100e9, SpentNs: 50e9, MeanNs: mean}, map[string]string{"done": StopTarget}},
		{"room for two: no interval, then nearest", Budget{TotalNs: 100e9, SpentNs: 88e9, MeanNs: mean},
			map[string]string{"done": StopTarget, "far": StopReplayBudget, "dear": StopReplayBudget}},
		{"a dear case skipped, a cheaper one after it paid", Budget{TotalNs: 100e9, SpentNs: 82e9, MeanNs: mean},
			map[string]string{"done": StopTarget, "dear": StopReplayBudget}},
		{"spent", Budget{TotalNs: 100e9, SpentNs: 100e9, MeanNs: mean},
			map[string]string{"done": StopTarget, "far": StopReplayBudget, "near": StopReplayBudget, "none": StopReplayBudget, "dear": StopReplayBudget}},
	} {
		if got := Share(cases, 0.015, 60e9, 2, tc.b); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Share = %v, want %v", tc.name, got, tc.want)
		}
	}
}
