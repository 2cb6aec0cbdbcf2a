package audit

import (
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/oracle"
)

// TestRecomputeLoadRule: the audit's own recomputation leaves a round
// whose visit overlapped other load out of the paired ratio under
// config.load "exclude" and counts it, keeps it under "allow" and in
// replays made before the rule (absent). A replay that kept the round
// while saying "exclude" is caught by the comparison of ratioExcluded and
// the ratio's range (replay's TestSummariesLoadRule has the same fixture).
func TestRecomputeLoadRule(t *testing.T) {
	var d artifacts.ReplayDoc
	d.Config.Baseline, d.Config.Interval = "b", "sign"
	var rows []samples.Row
	for rd := range 6 {
		for i, rt := range []string{"r", "b"} {
			ns := int64(200)
			if rt == "r" {
				ns = 100
				if rd == 2 {
					ns = 300
				}
			}
			v := artifacts.VisitResult{Visit: artifacts.Visit{Index: 2*rd + i, Round: rd, Case: "c", Route: rt}, Status: artifacts.StatusPassed, WallNs: 1e9}
			if rt == "r" && rd == 2 {
				v.Load = &artifacts.VisitLoad{OtherNs: 0.9e9, Loaded: true}
			}
			d.Visits = append(d.Visits, v)
			rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(rd), Case: "c", Route: rt, Kind: "novel", Calls: 10, TotalNs: 10 * ns, Clock: samples.ClockReplay})
		}
	}
	cpu := func(string) string { return oracle.DeviceCPU }
	for _, tc := range []struct {
		rule     string
		left     int
		ratioMax float64
	}{
		{artifacts.LoadExclude, 1, 0.5},
		{artifacts.LoadAllow, 0, 1.5},
		{"", 0, 1.5},
	} {
		d.Config.Load = tc.rule
		r := recompute(d, rows, cpu)[[2]string{"c", "r"}]
		if r.RatioExcluded != tc.left || r.RatioMax != tc.ratioMax || r.Ratio != 0.5 || r.MaxNs != 300 {
			t.Errorf("load %q: recomputed %d left out, ratio %g max %g, max %g ns; want %d, 0.5, %g, 300 ns (medians keep the round)", tc.rule, r.RatioExcluded, r.Ratio, r.RatioMax, r.MaxNs, tc.left, tc.ratioMax)
		}
	}
}

// TestRecomputeEveryRoundLoaded: with every round of a row left out the
// recomputation has no ratio and no NaN: "too few rounds", as replay says.
func TestRecomputeEveryRoundLoaded(t *testing.T) {
	d := artifacts.ReplayDoc{Config: artifacts.ReplayConfig{Baseline: "b", Interval: "sign", Load: artifacts.LoadExclude}}
	var rows []samples.Row
	for rd := range 2 {
		for i, rt := range []string{"r", "b"} {
			d.Visits = append(d.Visits, artifacts.VisitResult{Visit: artifacts.Visit{Index: 2*rd + i, Round: rd, Case: "c", Route: rt}, Status: artifacts.StatusPassed, WallNs: 1e9,
				Load: &artifacts.VisitLoad{OtherNs: 0.9e9, Loaded: rt == "r"}})
			rows = append(rows, samples.Row{Visit: int32(2*rd + i), Round: int32(rd), Case: "c", Route: rt, Kind: "novel", Calls: 1, TotalNs: 100, Clock: samples.ClockReplay})
		}
	}
	r := recompute(d, rows, func(string) string { return oracle.DeviceCPU })[[2]string{"c", "r"}]
	if r.Verdict != "too few rounds" || r.RatioExcluded != 2 || r.Ratio != 0 || r.RatioHi != 0 {
		t.Errorf("recomputed %+v, want too few rounds, 2 left out, no ratio", r)
	}
}
