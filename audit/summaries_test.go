package audit

import (
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/replay"
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
		r := recompute(d, rows, cpu, nil)[artifacts.Pair{Case: "c", Route: "r"}]
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
	r := recompute(d, rows, func(string) string { return oracle.DeviceCPU }, nil)[artifacts.Pair{Case: "c", Route: "r"}]
	if r.Verdict != "too few rounds" || r.RatioExcluded != 2 || r.Ratio != 0 || r.RatioHi != 0 {
		t.Errorf("recomputed %+v, want too few rounds, 2 left out, no ratio", r)
	}
}

// belowFloorFixture is 6 rounds of routes r and b (the baseline) on cases
// c and d, every visit passed, with a 150 ns floor on both cases: c's r
// (100 ns a call) and d's b are below it.
func belowFloorFixture() (artifacts.ReplayDoc, []artifacts.Prepared, []samples.Row) {
	d := artifacts.ReplayDoc{Config: replay.DefaultConfig.ReplayConfig}
	d.Config.Baseline = "b"
	d.Sessions = []artifacts.Session{{Floors: []artifacts.CaseFloor{
		{Case: "c", Bytes: 1 << 20, WorkingSet: 1 << 21, Bandwidth: 7e12, MemoryNs: 150},
		{Case: "d", Bytes: 1 << 20, WorkingSet: 1 << 21, Bandwidth: 7e12, MemoryNs: 150},
	}}}
	ns := map[artifacts.Pair]int64{{Case: "c", Route: "r"}: 100, {Case: "c", Route: "b"}: 200, {Case: "d", Route: "r"}: 300, {Case: "d", Route: "b"}: 100}
	var entries []artifacts.Prepared
	var rows []samples.Row
	for _, c := range []string{"c", "d"} {
		for _, rt := range []string{"r", "b"} {
			entries = append(entries, artifacts.Prepared{Case: c, Route: rt, Status: artifacts.StatusPrepared})
		}
	}
	for rd := range 6 {
		for _, e := range entries {
			v := artifacts.VisitResult{Visit: artifacts.Visit{Index: len(d.Visits), Round: rd, Case: e.Case, Route: e.Route}, Status: artifacts.StatusPassed, WallNs: 1e9}
			d.Visits = append(d.Visits, v)
			rows = append(rows, samples.Row{Visit: int32(v.Index), Round: int32(rd), Case: e.Case, Route: e.Route, Kind: "novel", Calls: 10, TotalNs: 10 * (ns[e.Pair()] + int64(rd)), Clock: samples.ClockReplay})
		}
	}
	return d, entries, rows
}

// TestRecomputeBelowFloor: a row whose fastest sample beats its case's
// floor failed in replay (replay.Summaries) with its statistics kept and
// no ratio, and neither gets a ratio the row it is the baseline of. The
// audit's recomputation must agree, or every replay holding such a row
// would be called tampered: in case c the route r (100 ns a call) is below
// the 150 ns floor, in case d the baseline b is. What replay stores and
// what the audit recomputes are compared field by field, with the floors
// and without them (an adaptive replay's stopping decisions use none).
func TestRecomputeBelowFloor(t *testing.T) {
	d, entries, rows := belowFloorFixture()
	cpu := func(string) string { return oracle.DeviceCPU }
	// With the sessions' floors, as replay's final summaries; without, as
	// an adaptive replay's stopping decisions (replay/adaptive.go), which
	// the audit's stopping-rule check re-derives with none.
	for _, fl := range []map[string]artifacts.CaseFloor{floors.OfSessions(d.Sessions), nil} {
		stored := replay.Summaries([]string{"c", "d"}, []string{"r", "b"}, entries, d.Visits, rows, d.Config, fl)
		got := recompute(d, rows, cpu, fl)
		for _, s := range stored {
			k := s.Pair()
			r := got[k]
			if r.MedianNs != s.MedianNs || r.MinNs != s.MinNs || r.Samples != s.Samples || r.Ratio != s.Ratio || r.RatioLo != s.RatioLo || r.RatioHi != s.RatioHi || r.Verdict != s.Verdict {
				t.Errorf("floors %v: %s/%s: replay stored median %g min %g samples %d ratio %g [%g, %g] %q; the audit recomputes %g %g %d %g [%g, %g] %q",
					fl != nil, k.Case, k.Route, s.MedianNs, s.MinNs, s.Samples, s.Ratio, s.RatioLo, s.RatioHi, s.Verdict, r.MedianNs, r.MinNs, r.Samples, r.Ratio, r.RatioLo, r.RatioHi, r.Verdict)
			}
			below := fl != nil && (k == artifacts.Pair{Case: "c", Route: "r"} || k == artifacts.Pair{Case: "d", Route: "b"})
			if below != strings.HasPrefix(s.Reason, "below_physical_floor") || (k.Route == "r" && (s.Ratio == 0) != (fl != nil)) || s.Samples != 6 {
				t.Errorf("floors %v: %s/%s: replay stored status %s %q, ratio %g, %d samples; want below the floor %v, a ratio for r only without floors, the statistics kept", fl != nil, k.Case, k.Route, s.Status, s.Reason, s.Ratio, s.Samples, below)
			}
		}
		if len(stored) != 4 || len(got) != 4 {
			t.Errorf("floors %v: replay stored %d summaries, the audit recomputed %d; want 4 each", fl != nil, len(stored), len(got))
		}
	}
}

// TestSummariesCheckBelowFloor: the summaries check holds replay's
// summaries of a checkpoint with floor-failed rows to be right (nothing
// else of the checkpoint is failed by them), and a ratio forged onto the
// row below its floor, or onto the row whose baseline is below it, is
// caught with the field and both values.
func TestSummariesCheckBelowFloor(t *testing.T) {
	d, entries, rows := belowFloorFixture()
	honest := replay.Summaries([]string{"c", "d"}, []string{"r", "b"}, entries, d.Visits, rows, d.Config, floors.OfSessions(d.Sessions))
	for _, tc := range []struct {
		forge string // the (case) whose r row gets a ratio of 0.5; "" none
		want  string
	}{
		{"", ""},
		{"c", "summary c/r ratio: stored 0.5, recomputed 0"},
		{"d", "summary d/r ratio: stored 0.5, recomputed 0"},
	} {
		d.Summary = slices.Clone(honest)
		for i := range d.Summary {
			if d.Summary[i].Case == tc.forge && d.Summary[i].Route == "r" {
				d.Summary[i].Ratio = 0.5
			}
		}
		fd := checkSummaries(&checkpoint{rdoc: d, pdoc: artifacts.PreparedDoc{Entries: entries}}, rows, nil)
		switch {
		case tc.want == "" && len(fd.problems) > 0:
			t.Errorf("honest summaries with floor-failed rows: %q, want no problem", fd.problems)
		case tc.want != "" && !slices.Contains(fd.problems, tc.want):
			t.Errorf("ratio forged on %s/r: %q, want %q among the problems", tc.forge, fd.problems, tc.want)
		}
	}
}

// TestStageNs: a row's stage (the median of its novel samples' span
// beyond the timer's number) is the same in replay's summary and the
// audit's recomputation, absent where no sample carries a timer number,
// and a replay that shrinks it (hiding how much of a row's novel time is
// the protocol's own cost) is caught with the field and both values.
func TestStageNs(t *testing.T) {
	d, entries, rows := belowFloorFixture()
	for i := range rows {
		if rows[i].Case == "c" {
			rows[i].TimerNs = rows[i].TotalNs - 400 - int64(rows[i].Round) // 400 to 405 ns beyond the timer
		}
	}
	honest := replay.Summaries([]string{"c", "d"}, []string{"r", "b"}, entries, d.Visits, rows, d.Config, nil)
	got := recompute(d, rows, func(string) string { return oracle.DeviceCPU }, nil)
	for _, s := range honest {
		want := 0.0
		if s.Case == "c" {
			want = 402.5
		}
		if s.StageNs != want || got[s.Pair()].StageNs != want {
			t.Errorf("%s/%s: replay stored stageNs %g, the audit recomputes %g; want %g", s.Case, s.Route, s.StageNs, got[s.Pair()].StageNs, want)
		}
	}
	// A replay made before config.stage records none, and the audit
	// recomputes none for it.
	old := d
	old.Config.Stage = false
	for _, s := range replay.Summaries([]string{"c"}, []string{"r"}, entries, d.Visits, rows, old.Config, nil) {
		if r := recompute(old, rows, func(string) string { return oracle.DeviceCPU }, nil)[s.Pair()]; s.StageNs != 0 || r.StageNs != 0 {
			t.Errorf("config.stage false: replay stored stageNs %g, the audit recomputes %g; want none", s.StageNs, r.StageNs)
		}
	}
	d.Summary = slices.Clone(honest)
	d.Summary[0].StageNs = 1 // c/r
	fd := checkSummaries(&checkpoint{rdoc: d, pdoc: artifacts.PreparedDoc{Entries: entries}}, rows, nil)
	if want := "summary c/r stageNs: stored 1, recomputed 402.5"; !slices.Contains(fd.problems, want) {
		t.Errorf("stageNs forged: %q, want %q among the problems", fd.problems, want)
	}
}
