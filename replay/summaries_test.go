package replay

import (
	"math"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// loadFixture is 6 rounds of a route "r" against a baseline "b" on one
// case, each visit a warm (batch) sample and a novel one (visit protocol
// 4): r's novel calls take 100 ns each in every round but round 2, where
// they take 300 (the round another process slowed), and b's 200
// throughout; their warm calls take 40 and 160 ns, a ratio (0.25) no
// summary of the novel samples gives. Round 2's visit of r is flagged for
// other load.
func loadFixture() ([]artifacts.Prepared, []artifacts.VisitResult, []samples.Row) {
	entries := []artifacts.Prepared{{Case: "c", Route: "r", Status: artifacts.StatusPrepared}, {Case: "c", Route: "b", Status: artifacts.StatusPrepared}}
	var visits []artifacts.VisitResult
	var rows []samples.Row
	for rd := range 6 {
		for i, rt := range []string{"r", "b"} {
			ns, warm := int64(200), int64(160)
			if rt == "r" {
				ns, warm = 100, 40
				if rd == 2 {
					ns = 300
				}
			}
			v := artifacts.VisitResult{Visit: artifacts.Visit{Index: 2*rd + i, Round: rd, Case: "c", Route: rt}, Status: artifacts.StatusPassed, WallNs: 1e9,
				Load: &artifacts.VisitLoad{OtherNs: 0.01e9}}
			if rt == "r" && rd == 2 {
				v.Load = &artifacts.VisitLoad{OtherNs: 0.9e9, Loaded: true}
			}
			visits = append(visits, v)
			rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(rd), Case: "c", Route: rt, Kind: "batch", Calls: 10, TotalNs: 10 * warm, Clock: samples.ClockReplay},
				samples.Row{Visit: int32(v.Index), Round: int32(rd), Case: "c", Route: rt, Kind: "novel", Calls: 10, TotalNs: 10 * ns, Clock: samples.ClockReplay})
		}
	}
	return entries, visits, rows
}

// TestSummariesLoadRule: under config.load "exclude" the round whose
// visit overlapped other load is left out of the paired ratio (and
// counted), never out of the row's medians; under "allow" it counts.
// Either way the row and its ratio rest on the novel samples, the batch
// samples' median beside them as the warm figure.
func TestSummariesLoadRule(t *testing.T) {
	entries, visits, rows := loadFixture()
	for _, tc := range []struct {
		rule           string
		pairs, left    int
		ratioMax, rmed float64
	}{
		{artifacts.LoadExclude, 5, 1, 0.5, 0.5},
		{artifacts.LoadAllow, 6, 0, 1.5, 0.5},
	} {
		cfg := DefaultConfig.ReplayConfig
		cfg.Baseline, cfg.Load = "b", tc.rule
		var r artifacts.Summary
		for _, s := range Summaries([]string{"c"}, []string{"r", "b"}, entries, visits, rows, cfg, nil) {
			if s.Route == "r" {
				r = s
			}
		}
		if r.RatioPairs != tc.pairs || r.RatioExcluded != tc.left || r.RatioMax != tc.ratioMax || r.Ratio != tc.rmed || r.Samples != 6 || math.Abs(r.MaxNs-300) > 1e-9 {
			t.Errorf("load %q: row r = %d pairs, %d left out, ratio %g max %g, %d samples, max %g ns; want %d, %d, %g, %g, 6 samples (the loaded round's kept), 300 ns",
				tc.rule, r.RatioPairs, r.RatioExcluded, r.Ratio, r.RatioMax, r.Samples, r.MaxNs, tc.pairs, tc.left, tc.rmed, tc.ratioMax)
		}
		if r.Kind != "novel" || math.Abs(r.MedianNs-100) > 1e-9 || math.Abs(r.WarmNs-40) > 1e-9 {
			t.Errorf("load %q: row r = kind %q, median %g ns, warm %g ns; want novel, 100 ns (the novel samples), warm 40 ns (the batch samples)", tc.rule, r.Kind, r.MedianNs, r.WarmNs)
		}
	}
}

// TestSummariesEveryRoundLoaded: a row whose every round was left out has
// no ratio, says "too few rounds" and counts them: no NaN reaches the
// document (json refuses NaN, and a replay once failed on it).
func TestSummariesEveryRoundLoaded(t *testing.T) {
	entries, visits, rows := loadFixture()
	for i := range visits {
		if visits[i].Route == "r" {
			visits[i].Load = &artifacts.VisitLoad{OtherNs: 0.9e9, Loaded: true}
		}
	}
	cfg := DefaultConfig.ReplayConfig
	cfg.Baseline = "b"
	for _, s := range Summaries([]string{"c"}, []string{"r", "b"}, entries, visits, rows, cfg, nil) {
		if s.Route == "r" && (s.RatioPairs != 0 || s.RatioExcluded != 6 || s.Verdict != "too few rounds" || s.Ratio != 0 || s.RatioLo != 0) {
			t.Errorf("row r = %+v, want no ratio, 6 rounds left out, too few rounds", s)
		}
	}
}
