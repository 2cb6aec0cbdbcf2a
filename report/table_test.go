package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/golden"
	"github.com/tilepipe/tilepipe/stats"
)

// TestMachineLoad: a replay that measured no load renders nothing (so
// older results.md render as they did); a quiet one says so; a busy one
// names its flagged visits, the first ten and how many more.
func TestMachineLoad(t *testing.T) {
	visit := func(i int, other int64, loaded bool) artifacts.VisitResult {
		return artifacts.VisitResult{Visit: artifacts.Visit{Index: i, Case: "c", Route: "r"}, WallNs: 1e9, Load: &artifacts.VisitLoad{OtherNs: other, Loaded: loaded}}
	}
	if got := machineLoad([]artifacts.VisitResult{{WallNs: 1e9}}, artifacts.LoadExclude); got != "" {
		t.Errorf("no load measured: %q, want nothing", got)
	}
	quiet := machineLoad([]artifacts.VisitResult{visit(0, 0.01e9, false), visit(1, 0.03e9, false), visit(2, 0.02e9, false)}, artifacts.LoadExclude)
	if want := "median 0.02, most 0.03 (visit 1, c r). No visit overlapped more than 0.25 cores.\n"; !strings.HasSuffix(quiet, want) {
		t.Errorf("quiet: %q, want it to end %q", quiet, want)
	}
	var busy []artifacts.VisitResult
	for i := range 12 {
		busy = append(busy, visit(i, 0.5e9, true))
	}
	for _, tc := range []struct{ rule, what string }{
		{artifacts.LoadExclude, "flagged; their rounds are left out of the paired ratios, not of the medians"},
		{artifacts.LoadAllow, "flagged; kept in every statistic, as --allow-load asked"},
		{"", "flagged; still in every statistic"},
	} {
		got := machineLoad(busy, tc.rule)
		if want := fmt.Sprintf("12 of 12 visits overlapped more than 0.25 cores (%s): visit 0 (c r, round 1) 0.50; ", tc.what); !strings.Contains(got, want) || !strings.HasSuffix(got, "; and 2 more.\n") {
			t.Errorf("busy, load rule %q: %q, want %q and the last two counted", tc.rule, got, want)
		}
	}
}

// TestTableTooFewRounds: a row whose ratios are too few for an exact
// interval shows their range in the ratio column and no interval, so
// nobody reads the range as a 95% interval; a row with enough shows its
// interval, and the rounds the load rule left out of it.
func TestTableTooFewRounds(t *testing.T) {
	row := func(route, verdict string, pairs int) artifacts.Summary {
		return artifacts.Summary{Case: "c", Route: route, Status: artifacts.StatusPassed, MedianNs: 1000, MinNs: 900, MaxNs: 1100,
			RatioPairs: pairs, Ratio: 0.5, RatioMin: 0.4, RatioMax: 0.6, RatioLo: 0.41, RatioHi: 0.59, Verdict: verdict}
	}
	doc := artifacts.ReplayDoc{Config: artifacts.ReplayConfig{Rounds: 2, Baseline: "b", Interval: stats.IntervalSign},
		Summary: []artifacts.Summary{row("few", stats.TooFew, 2), row("many", stats.Faster, 6), row("b", "", 0), row("loaded", stats.Faster, 6), row("all loaded", stats.TooFew, 0)}}
	doc.Summary[3].RatioExcluded = 2
	doc.Summary[4].RatioExcluded = 6
	got := Table(doc)
	for _, want := range []string{
		"| c | few | passed | 1 µs | 900 ns – 1.1 µs | 0 ns | 0.500 [0.400 – 0.600] | - | too few rounds |\n",
		"| c | many | passed | 1 µs | 900 ns – 1.1 µs | 0 ns | 0.500 [0.400 – 0.600] | 0.410 – 0.590 | faster |\n",
		"| c | loaded | passed | 1 µs | 900 ns – 1.1 µs | 0 ns | 0.500 [0.400 – 0.600] | 0.410 – 0.590 | faster (2 rounds left out: load) |\n",
		"| c | all loaded | passed | 1 µs | 900 ns – 1.1 µs | 0 ns | - |  | too few rounds (6 rounds left out: load) |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table: want the row\n%s in\n%s", want, got)
		}
	}
}

// TestBracket: a replay whose visits recorded no freeze cycles (GPU
// visits, replays made before the field) renders no bracket section, so
// their results.md render as they did; one that did gives each passed
// novel row (freeze + channel) / (N × median per call), the median over
// its passed visits, and leaves out failed visits and rows.
func TestBracket(t *testing.T) {
	v := func(i int, route, status string, freeze int64) artifacts.VisitResult {
		return artifacts.VisitResult{Visit: artifacts.Visit{Index: i, Case: "c", Route: route}, Status: status,
			Novel: &artifacts.NovelRecord{Samples: 5, Calls: 10, FreezeNs: freeze}}
	}
	row := func(route, status string) artifacts.Summary {
		return artifacts.Summary{Case: "c", Route: route, Status: status, Kind: "novel", MedianNs: 10_000, ChannelNs: 10_000}
	}
	doc := artifacts.ReplayDoc{Summary: []artifacts.Summary{row("a", artifacts.StatusPassed), row("b", artifacts.StatusFailed)},
		Visits: []artifacts.VisitResult{v(0, "a", artifacts.StatusPassed, 0), v(1, "b", artifacts.StatusFailed, 0)}}
	if got := bracket(doc); got != "" {
		t.Errorf("no freeze cycles recorded: %q, want nothing", got)
	}
	doc.Visits = []artifacts.VisitResult{v(0, "a", artifacts.StatusPassed, 30_000), v(1, "a", artifacts.StatusPassed, 40_000),
		v(2, "a", artifacts.StatusPassed, 50_000), v(3, "a", artifacts.StatusFailed, 900_000), v(4, "b", artifacts.StatusFailed, 40_000)}
	got := bracket(doc)
	// (40 µs + 10 µs) / (10 × 10 µs) = 50%.
	if want := "| c | a | 10 | 40 µs | 10 µs | 50.0% |\n"; !strings.HasSuffix(got, want) || strings.Contains(got, "| c | b |") {
		t.Errorf("bracket section:\n%s\nwant it to end %q and leave the failed row out", got, want)
	}
	if !strings.Contains(Table(doc), got) {
		t.Errorf("the table does not hold the bracket section")
	}
}

// TestRuleTwoSections: under novel rule 2 the table lists every novel
// row's judged calls over its passed visits with the escape bound, and
// each GPU row's launch fixed cost (single − warm) as a share of its
// novel time; a rule-1 replay (no novelRule, no singleNs: the committed
// checkpoints) renders neither, so its results.md renders as it did. A
// failed row and a CPU row get no fixed-cost line.
func TestRuleTwoSections(t *testing.T) {
	visit := func(i int, c, r string, checked int, status string) artifacts.VisitResult {
		return artifacts.VisitResult{Visit: artifacts.Visit{Index: i, Case: c, Route: r}, Status: status,
			Novel: &artifacts.NovelRecord{Samples: 5, Calls: 20, Checked: make([]int64, checked)}}
	}
	row := func(c, r, status string) artifacts.Summary {
		return artifacts.Summary{Case: c, Route: r, Status: status, Kind: "novel", MedianNs: 10_000, WarmNs: 8_000, SingleNs: 28_000}
	}
	doc := artifacts.ReplayDoc{
		Config:   artifacts.ReplayConfig{Rounds: 2, Baseline: "r", NovelRule: 2},
		Sessions: []artifacts.Session{{Floors: []artifacts.CaseFloor{{Case: "g", Device: "cuda"}, {Case: "cpu"}}}},
		Visits: []artifacts.VisitResult{visit(0, "g", "r", 10, artifacts.StatusPassed), visit(1, "g", "r", 10, artifacts.StatusPassed),
			visit(2, "cpu", "r", 100, artifacts.StatusPassed), visit(3, "g", "bad", 10, artifacts.StatusFailed)},
		Summary: []artifacts.Summary{row("g", "r", artifacts.StatusPassed), row("cpu", "r", artifacts.StatusPassed), row("g", "bad", artifacts.StatusFailed)},
	}
	got := Table(doc)
	for _, want := range []string{
		// c = 20: e^(−2) = 0.14; ln(100)/20 = 23%
		"| case | route | judged (c) | timed | escape at f = 10% | f caught at 99% |\n|---|---|---:|---:|---:|---:|\n| g | r | 20 | 200 | 0.14 | 23% |\n| cpu | r | 100 | 100 | 4.5e-05 | 4.61% |\n\n",
		// 20 µs of fixed cost over 20 calls of 10 µs: 10%
		"| case | route | calls a sample (N) | single call | warm call | fixed cost | share of novel time |\n|---|---|---:|---:|---:|---:|---:|\n| g | r | 20 | 28 µs | 8 µs | 20 µs | 10.0% |\n\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rule 2 table: want\n%s\nin\n%s", want, got)
		}
	}
	doc.Config.NovelRule = 0
	for i := range doc.Summary {
		doc.Summary[i].SingleNs = 0
	}
	if got := Table(doc); strings.Contains(got, "Judged calls") || strings.Contains(got, "Launch fixed cost") {
		t.Errorf("a rule 1 table holds a rule 2 section:\n%s", got)
	}
}

// TestTableGolden: results.md as a reader sees it, rendered from the
// committed GPU checkpoint's replay document (testdata/gpu-checkpoint).
func TestTableGolden(t *testing.T) {
	st, err := artifacts.OpenStage("../testdata/gpu-checkpoint/replay", artifacts.ReplayType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc artifacts.ReplayDoc
	if err := st.ReadDoc(&doc); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "gpu-checkpoint-results.md", []byte(Table(doc)))
}

// TestStageCost: a GPU row (visits with idle probes) whose stage is
// known gets its share of the novel time, stage / (N × median per call),
// the median N over its passed visits, a mark above half, and the
// stages' factor in its ratio; CPU rows (bracket's), failed rows and rows
// with no stage are left out, and bracket leaves the GPU rows out.
func TestStageCost(t *testing.T) {
	// freeze > 0 makes a CPU visit (no idle probes), as bracket's are;
	// GPU visits record freeze cycles too, and their probes.
	v := func(i int, route, status string, calls, freeze int64) artifacts.VisitResult {
		r := artifacts.VisitResult{Visit: artifacts.Visit{Index: i, Case: "c", Route: route}, Status: status,
			Novel: &artifacts.NovelRecord{Samples: 5, Calls: calls, FreezeNs: 40_000}}
		if freeze == 0 {
			r.GPUIdle = &artifacts.GPUIdle{Probes: 10, WorstNs: 50_000}
		}
		return r
	}
	row := func(route, status string, median, stage float64) artifacts.Summary {
		return artifacts.Summary{Case: "c", Route: route, Status: status, Kind: "novel", MedianNs: median, StageNs: stage}
	}
	doc := artifacts.ReplayDoc{
		Summary: []artifacts.Summary{row("big", artifacts.StatusPassed, 289_000, 6_000_000), row("small", artifacts.StatusPassed, 10_000, 1_000_000),
			row("cpu", artifacts.StatusPassed, 10_000, 50_000), row("failed", artifacts.StatusFailed, 10_000, 1_000_000), row("none", artifacts.StatusPassed, 10_000, 0)},
		Visits: []artifacts.VisitResult{v(0, "big", artifacts.StatusPassed, 21, 0), v(1, "big", artifacts.StatusPassed, 21, 0), v(2, "big", artifacts.StatusFailed, 5, 0),
			v(3, "small", artifacts.StatusPassed, 1000, 0), v(4, "cpu", artifacts.StatusPassed, 100, 30_000), v(5, "failed", artifacts.StatusFailed, 100, 0),
			v(6, "none", artifacts.StatusPassed, 100, 0)}}
	doc.Config.Baseline = "small"
	doc.Summary[0].RatioPairs = 2 // big has a ratio against small
	got := stageCost(doc)
	// 6 ms / (21 × 289 µs) = 98.9%; 1 ms / (1000 × 10 µs) = 10%; big's
	// stages' factor (1 − 0.1) / (1 − 0.98863) = 79.161.
	for _, want := range []string{"| c | big | 21 | 6 ms | 286 µs | 98.9% (mostly the stage) | 79.161 |\n", "| c | small | 1000 | 1 ms | 1 µs | 10.0% | - |\n", "\n1 of these rows' novel time is mostly the stage's own cost.\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("stage section:\n%s\nwant %q in it", got, want)
		}
	}
	for _, left := range []string{"| c | cpu |", "| c | failed |", "| c | none |"} {
		if strings.Contains(got, left) {
			t.Errorf("stage section:\n%s\nwant no row %q", got, left)
		}
	}
	if !strings.Contains(Table(doc), got) {
		t.Errorf("the table does not hold the stage section")
	}
	// The bracket section keeps the CPU row and leaves the GPU rows with a
	// stage to this one.
	if br := bracket(doc); !strings.Contains(br, "| c | cpu |") || strings.Contains(br, "| c | big |") || strings.Contains(br, "| c | small |") {
		t.Errorf("bracket section:\n%s\nwant the cpu row and neither GPU row with a stage", br)
	}
}
