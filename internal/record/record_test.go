package record

import (
	"reflect"
	"slices"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
)

var cfg = artifacts.ReplayConfig{Rounds: 2, Samples: 2, Singles: 1, SampleMs: 1, Threads: 2, Sets: 2}

// cpu is a CPU visit record (visit protocol 4) and its sample table as
// replay writes them: 64 calls per batch sample of 1.2 ms and 10 novel
// slots, so 2 novel samples of 10 calls (the calibrated 64 within the
// slots), every call checked (visit.NovelChecks is far more). Its clocks
// are replay's; [gpu] is the same visit on a GPU.
func cpu() (artifacts.VisitResult, []samples.Row) {
	v := artifacts.VisitResult{Visit: artifacts.Visit{Index: 3, Round: 1, Position: 1, Case: "gemm-16x16x16", Route: "naive"},
		Status: artifacts.StatusPassed, Threads: 2, Sets: 2, CallsPerSample: 64, FreshSets: 10,
		Novel: &artifacts.NovelRecord{Samples: 2, Calls: 10, Outputs: []artifacts.TensorRef{{Name: "C"}}}}
	for g := range int64(20) {
		v.Novel.Checked = append(v.Novel.Checked, g)
	}
	rows := []samples.Row{
		row(samples.KindEmpty, 0, 0, 30_000), row(samples.KindEmpty, 1, 0, 31_000),
		row(samples.KindBatch, 0, 64, 1_200_000), row(samples.KindBatch, 1, 64, 1_250_000),
		row(samples.KindSingle, 0, 1, 50_000),
		row(samples.KindNovel, 0, 10, 500_000), row(samples.KindNovel, 1, 10, 510_000),
	}
	return v, rows
}

// gpu is [cpu]'s visit on a GPU: every sample that launches is timed by
// CUDA events.
func gpu() (artifacts.VisitResult, []samples.Row) {
	v, rows := cpu()
	return v, onCUDA(rows)
}

// row is a sample row of visit 3 on replay's clock.
func row(kind string, i int, calls, span int64) samples.Row {
	return samples.Row{Visit: 3, Round: 1, Position: 1, Case: "gemm-16x16x16", Route: "naive", Kind: kind, Index: int32(i), Calls: calls, TotalNs: span, TimerNs: span - 20_000, Clock: samples.ClockReplay}
}

// onCUDA puts every row but the empty samples on CUDA events, as a GPU
// visit's are.
func onCUDA(rows []samples.Row) []samples.Row {
	for i := range rows {
		if rows[i].Kind != samples.KindEmpty {
			rows[i].Clock = samples.ClockCUDA
		}
	}
	return rows
}

// fixture is the honest visit on device: [cpu] or [gpu].
func fixture(device string) (artifacts.VisitResult, []samples.Row) {
	if device == oracle.DeviceCUDA {
		return gpu()
	}
	return cpu()
}

// devices are the devices every record rule is judged on: the rules are
// the same on both (only the clocks differ, which onCUDA sets).
var devices = []string{oracle.DeviceCPU, oracle.DeviceCUDA}

func TestVisit(t *testing.T) {
	tests := []struct {
		name string
		edit func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row
		cfg  func(c *artifacts.ReplayConfig)
		want []string
	}{
		{"honest", nil, nil, nil},
		{"threads", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.Threads = 4; return rows }, nil,
			[]string{"visit 3: threads 4, config.threads 2"}},
		{"config threads", nil, func(c *artifacts.ReplayConfig) { c.Threads = 8 },
			[]string{"visit 3: threads 2, config.threads 8"}},
		{"sets", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.Sets = 3; return rows }, nil,
			[]string{"visit 3: sets 3, config.sets 2"}},
		{"callsPerSample", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.CallsPerSample = 32; return rows }, nil,
			[]string{"visit 3: batch sample 0: 64 calls, callsPerSample 32", "visit 3: batch sample 1: 64 calls, callsPerSample 32"}},
		{"callsPerSample not a power of two", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.CallsPerSample = 48
			for i := range rows {
				if rows[i].Kind == samples.KindBatch {
					rows[i].Calls = 48
				}
			}
			return rows
		}, nil, []string{"visit 3: callsPerSample 48: calibration doubles the calls from 1 up to 1073741824, so a power of two in that range"}},
		{"callsPerSample over the cap", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.CallsPerSample = 2 * MaxCalls
			for i := range rows {
				if rows[i].Kind == samples.KindBatch {
					rows[i].Calls = 2 * MaxCalls
				}
			}
			return rows
		}, nil, []string{"visit 3: callsPerSample 2147483648: calibration doubles the calls from 1 up to 1073741824, so a power of two in that range"}},
		{"one batch sample with more calls", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { rows[3].Calls = 128; return rows }, nil,
			[]string{"visit 3: batch sample 1: 128 calls, callsPerSample 64"}},
		{"single of two calls", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { rows[4].Calls = 2; return rows }, nil,
			[]string{"visit 3: single sample 0: 2 calls, want 1"}},
		{"empty with a call", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { rows[0].Calls = 1; return rows }, nil,
			[]string{"visit 3: empty sample 0: 1 calls, want 0"}},
		{"batch sample dropped", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { return slices.Delete(rows, 3, 4) }, nil,
			[]string{"visit 3: 1 batch samples, config.samples 2"}},
		{"config samples", nil, func(c *artifacts.ReplayConfig) { c.Samples = 5 }, []string{
			"visit 3: 2 empty samples, config.samples 5", "visit 3: 2 batch samples, config.samples 5", "visit 3: 2 novel samples, config.samples 5",
			"visit 3: novel samples 2, config.samples 5"}},
		{"config singles", nil, func(c *artifacts.ReplayConfig) { c.Singles = 0 },
			[]string{"visit 3: 1 single samples, config.singles 0"}},
		{"unknown kind", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { rows[4].Kind = "warmup"; return rows }, nil,
			[]string{"visit 3: samples row 4: kind \"warmup\", want one of empty, batch, single, novel, graph", "visit 3: 0 single samples, config.singles 1"}},
		{"row of another visit", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { rows[2].Visit = 4; return rows }, nil,
			[]string{"visit 3: samples row 2 belongs to visit 4 (round 1, position 1, gemm-16x16x16 naive), not to this one (round 1, position 1, gemm-16x16x16 naive)"}},
		{"row of another route", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			rows[0].Route = "halide"
			return rows
		}, nil,
			[]string{"visit 3: samples row 0 belongs to visit 3 (round 1, position 1, gemm-16x16x16 halide), not to this one (round 1, position 1, gemm-16x16x16 naive)"}},
		{"freshSets", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.FreshSets = 0; return rows }, nil, []string{
			"visit 3: freshSets 0, want at least 1",
			"visit 3: novel calls 10: the warm samples' 64 calls within 0 slots (freshSets) give 1"}},
		{"batch samples slowed", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			// The novel samples' calls follow the calibrated calls per
			// sample and the slots, not the batch samples' time (protocol
			// 3's fresh plan did): slower batch samples change nothing.
			rows[2].TotalNs, rows[3].TotalNs = 64*1_900_000, 64*1_900_000
			rows[2].TimerNs, rows[3].TimerNs = 64*1_900_000-20_000, 64*1_900_000-20_000
			return rows
		}, nil, nil},
		{"reordered", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			rows[4], rows[5] = rows[5], rows[4]
			return rows
		}, nil, []string{"visit 3: samples row 4 is novel sample 0, want single sample 0 (replay's order: empty, batch and single samples, then the novel samples, then any graph samples)"}},
		{"indexes swapped", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			rows[2].Index, rows[3].Index = 1, 0
			return rows
		}, nil, []string{"visit 3: samples row 2 is batch sample 1, want batch sample 0 (replay's order: empty, batch and single samples, then the novel samples, then any graph samples)"}},
	}
	for _, tt := range tests {
		for _, device := range devices {
			t.Run(tt.name+"/"+device, func(t *testing.T) {
				v, rows := cpu()
				c := cfg
				if tt.edit != nil {
					rows = tt.edit(&v, rows)
				}
				if tt.cfg != nil {
					tt.cfg(&c)
				}
				if device == oracle.DeviceCUDA {
					rows = onCUDA(rows)
				}
				if got := Visit(v, rows, c, device, "", sets.NovelChecks); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Visit(%s, %s) =\n%q\nwant\n%q", tt.name, device, got, tt.want)
				}
			})
		}
	}
}

// TestVisitNovel: a visit's novel record and samples are the ones replay
// takes, on a CPU and on a GPU alike; every way a record or a row strays
// from that is named, and a visit with protocol 3's samples (a control
// before each fresh sample, a fresh-calls count) is refused.
func TestVisitNovel(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row
		want []string
	}{
		{"honest", nil, nil},
		{"no record", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.Novel = nil; return rows },
			[]string{"visit 3: no novel record: every visit takes novel samples (visit protocol 4; a replay made before it is re-run, not audited)"}},
		{"protocol 3's samples", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			rows = rows[:5]
			for i := range 3 {
				rows = append(rows, row("control", i, 3, 90_000), row("fresh", i, 3, 120_000))
			}
			return rows
		}, []string{
			`visit 3: samples row 5: kind "control", want one of empty, batch, single, novel, graph`,
			`visit 3: samples row 6: kind "fresh", want one of empty, batch, single, novel, graph`,
			`visit 3: samples row 7: kind "control", want one of empty, batch, single, novel, graph`,
			`visit 3: samples row 8: kind "fresh", want one of empty, batch, single, novel, graph`,
			`visit 3: samples row 9: kind "control", want one of empty, batch, single, novel, graph`,
			`visit 3: samples row 10: kind "fresh", want one of empty, batch, single, novel, graph`,
			"visit 3: 0 novel samples, config.samples 2"}},
		{"fresh calls beside it", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.FreshCalls = 9; return rows },
			[]string{"visit 3: novel record beside 9 fresh calls and 0 fresh output tensors: visit protocol 4 takes no fresh samples"}},
		{"fresh outputs beside it", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.FreshOutputs = []artifacts.TensorRef{{Name: "C"}}
			return rows
		}, []string{"visit 3: novel record beside 0 fresh calls and 1 fresh output tensors: visit protocol 4 takes no fresh samples"}},
		{"slots", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.FreshSets = 12; return rows },
			[]string{"visit 3: novel calls 10: the warm samples' 64 calls within 12 slots (freshSets) give 12"}},
		{"fewer slots", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.FreshSets = 6; return rows },
			[]string{"visit 3: novel calls 10: the warm samples' 64 calls within 6 slots (freshSets) give 6"}},
		{"fewer calls than calibrated", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.Novel.Calls, v.Novel.Checked = 5, v.Novel.Checked[:10]
			for i := range rows {
				if rows[i].Kind == samples.KindNovel {
					rows[i].Calls = 5
				}
			}
			return rows
		}, []string{"visit 3: novel calls 5: the warm samples' 64 calls within 10 slots (freshSets) give 10"}},
		{"negative freeze cycle", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.Novel.FreezeNs = -1; return rows },
			[]string{"visit 3: novel freezeNs -1: want a duration, 0 or more"}},
		{"record samples", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.Novel.Samples = 3; return rows },
			[]string{"visit 3: novel samples 3, config.samples 2"}},
		{"a sample of other calls", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { rows[6].Calls = 20; return rows },
			[]string{"visit 3: novel sample 1: 20 calls, want 10"}},
		{"a sample dropped", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { return rows[:6] },
			[]string{"visit 3: 1 novel samples, config.samples 2"}},
		{"novel samples reordered", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			rows[5].Index, rows[6].Index = 1, 0
			return rows
		}, []string{"visit 3: samples row 5 is novel sample 1, want novel sample 0 (replay's order: empty, batch and single samples, then the novel samples, then any graph samples)"}},
		{"a checked call dropped", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.Novel.Checked = v.Novel.Checked[1:]
			return rows
		}, []string{"visit 3: novel checked: 19 calls, want 20 (10 in each of 2 samples of 10 calls; the case's rule judges 700 a visit)"}},
		{"a checked call moved to another sample", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.Novel.Checked[9] = 10
			return rows
		}, []string{"visit 3: novel checked[9] = 10: want a call of sample 0 (0 to 9), above checked[8]"}},
		{"a checked call twice", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.Novel.Checked[11] = 10
			return rows
		}, []string{"visit 3: novel checked[11] = 10: want a call of sample 1 (10 to 19), above checked[10]"}},
	} {
		for _, device := range devices {
			t.Run(tc.name+"/"+device, func(t *testing.T) {
				v, rows := cpu()
				if tc.edit != nil {
					rows = tc.edit(&v, rows)
				}
				if device == oracle.DeviceCUDA {
					rows = onCUDA(rows)
				}
				if got := Visit(v, rows, cfg, device, "", sets.NovelChecks); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Visit(%s, %s) =\n%q\nwant\n%q", tc.name, device, got, tc.want)
				}
			})
		}
	}
}

// TestVisitJudgedLimit: under rule 2 a large case's visit judges fewer
// calls (sets.Rule.Checks): 2 of each sample's 10 where the rule allows 4
// a visit. A record of rule 1's 10 a sample is refused for such a case, as
// is one with fewer than the rule gives; the honest record passes.
func TestVisitJudgedLimit(t *testing.T) {
	for _, device := range devices {
		v, rows := cpu()
		if device == oracle.DeviceCUDA {
			rows = onCUDA(rows)
		}
		if got, want := Visit(v, rows, cfg, device, "", 4), []string{"visit 3: novel checked: 20 calls, want 4 (2 in each of 2 samples of 10 calls; the case's rule judges 4 a visit)"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rule 1's checks under a limit of 4: %q, want %q", device, got, want)
		}
		v.Novel.Checked = []int64{v.Novel.Checked[0], v.Novel.Checked[1], v.Novel.Checked[10], v.Novel.Checked[11]}
		if got := Visit(v, rows, cfg, device, "", 4); got != nil {
			t.Errorf("%s: 2 a sample under a limit of 4: %q, want none", device, got)
		}
		if got, want := Visit(v, rows, cfg, device, "", 8), []string{"visit 3: novel checked: 4 calls, want 8 (4 in each of 2 samples of 10 calls; the case's rule judges 8 a visit)"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: 2 a sample under a limit of 8: %q, want %q", device, got, want)
		}
	}
}

// TestVisitClock: a GPU case's samples are timed by CUDA events, its
// empty samples and every CPU sample by replay's span; a row that names
// the other clock (the timer's own number passed off as the time of a CPU
// sample, or replay's span as a GPU time) is named, novel samples' rows
// as much as warm ones'.
func TestVisitClock(t *testing.T) {
	for _, device := range devices {
		if v, rows := fixture(device); Visit(v, rows, cfg, device, "", sets.NovelChecks) != nil {
			t.Errorf("Visit(honest %s visit) = %q, want none", device, Visit(v, rows, cfg, device, "", sets.NovelChecks))
		}
	}
	for _, tc := range []struct {
		name   string
		device string
		row    int
		clock  string
		want   string
	}{
		{"GPU batch sample on replay's clock", oracle.DeviceCUDA, 2, samples.ClockReplay, `visit 3: batch sample 0: clock "replay", want "cuda_events" for a cuda case`},
		{"GPU novel sample on replay's clock", oracle.DeviceCUDA, 6, samples.ClockReplay, `visit 3: novel sample 1: clock "replay", want "cuda_events" for a cuda case`},
		{"GPU empty sample on CUDA events", oracle.DeviceCUDA, 0, samples.ClockCUDA, `visit 3: empty sample 0: clock "cuda_events", want "replay" for a cuda case`},
		{"CPU batch sample on the timer's clock", oracle.DeviceCPU, 2, samples.ClockCUDA, `visit 3: batch sample 0: clock "cuda_events", want "replay" for a cpu case`},
		{"CPU novel sample on the timer's clock", oracle.DeviceCPU, 5, samples.ClockCUDA, `visit 3: novel sample 0: clock "cuda_events", want "replay" for a cpu case`},
	} {
		v, rows := fixture(tc.device)
		rows[tc.row].Clock = tc.clock
		if got, want := Visit(v, rows, cfg, tc.device, "", sets.NovelChecks), []string{tc.want}; !reflect.DeepEqual(got, want) {
			t.Errorf("Visit(%s) = %q, want %q", tc.name, got, want)
		}
	}
}

// TestVisitClockStaged: under novel rule 3 a GPU visit's novel samples
// are staged and timed by replay's span, whatever the route; their
// events passed off as the time (a rule-2 timer's record relabelled) are
// named, and its other samples keep their events.
func TestVisitClockStaged(t *testing.T) {
	c3 := cfg
	c3.NovelRule = int(sets.Rule3)
	staged := func() (artifacts.VisitResult, []samples.Row) {
		v, rows := gpu()
		for i := range rows {
			if rows[i].Kind == samples.KindNovel {
				rows[i].Clock = samples.ClockReplay
			}
		}
		return v, rows
	}
	if v, rows := staged(); Visit(v, rows, c3, oracle.DeviceCUDA, "", sets.NovelChecks) != nil {
		t.Errorf("Visit(a staged GPU visit) = %q, want none", Visit(v, rows, c3, oracle.DeviceCUDA, "", sets.NovelChecks))
	}
	for _, tc := range []struct {
		name  string
		row   int
		clock string
		want  string
	}{
		{"novel sample on its events", 5, samples.ClockCUDA, `visit 3: novel sample 0: clock "cuda_events", want "replay" for a cuda case`},
		{"batch sample on replay's clock", 2, samples.ClockReplay, `visit 3: batch sample 0: clock "replay", want "cuda_events" for a cuda case`},
	} {
		v, rows := staged()
		rows[tc.row].Clock = tc.clock
		if got, want := Visit(v, rows, c3, oracle.DeviceCUDA, "", sets.NovelChecks), []string{tc.want}; !reflect.DeepEqual(got, want) {
			t.Errorf("Visit(%s) = %q, want %q", tc.name, got, want)
		}
	}
	c9 := cfg
	c9.NovelRule = 9
	if v, rows := staged(); !reflect.DeepEqual(Visit(v, rows, c9, oracle.DeviceCUDA, "", sets.NovelChecks), []string{"visit 3: config.novelRule 9: want 2 or 3 (or absent, in a replay made before rule 2)"}) {
		t.Errorf("Visit(novel rule 9) = %q", Visit(v, rows, c9, oracle.DeviceCUDA, "", sets.NovelChecks))
	}
}

// calibrated is n passed visits of 64 calls per batch sample, each batch
// sample span ns long.
func calibrated(n int, calls int64, span int64) ([]artifacts.VisitResult, [][]samples.Row) {
	var vs []artifacts.VisitResult
	var rows [][]samples.Row
	for i := range n {
		vs = append(vs, artifacts.VisitResult{Visit: artifacts.Visit{Index: i}, Status: artifacts.StatusPassed, CallsPerSample: calls})
		rows = append(rows, []samples.Row{
			{Visit: int32(i), Kind: samples.KindEmpty, TotalNs: 30_000},
			{Visit: int32(i), Kind: samples.KindBatch, Calls: calls, TotalNs: span},
			{Visit: int32(i), Kind: samples.KindBatch, Calls: calls, TotalNs: span + 100_000},
		})
	}
	return vs, rows
}

func TestCalibration(t *testing.T) {
	tests := []struct {
		name     string
		sampleMs float64
		visits   int
		calls    int64
		span     int64
		edit     func(vs []artifacts.VisitResult, rows [][]samples.Row)
		want     []string
	}{
		{"honest", 1, 4, 64, 1_400_000, nil, nil},
		{"honest at the lower edge", 1, 4, 64, 250_000, nil, nil},
		{"sampleMs raised", 100, 4, 64, 1_400_000, nil, []string{
			"batch samples: the median visit's median batch sample lasted 1.45ms, less than config.sampleMs 100 ms / 4: calibration doubles the calls until a sample lasts sampleMs, and the batch samples repeat them (4 visits below 1073741824 calls)"}},
		{"sampleMs lowered", 20, 4, 64, 400_000_000, nil, []string{
			"batch samples: the median visit's fastest batch sample lasted 400ms, more than 4 x 2 x config.sampleMs 20 ms + 5ms: calibration stops at the first doubling that lasts sampleMs, so half the calls lasted less (4 visits of more than one call)"}},
		{"too few visits to judge", 100, 2, 64, 1_400_000, nil, nil},
		{"one preempted calibration", 20, 3, 64, 25_000_000, func(vs []artifacts.VisitResult, rows [][]samples.Row) {
			rows[0][1].TotalNs, rows[0][2].TotalNs = 100_000, 100_000
		}, nil},
		{"failed visits do not count", 100, 4, 64, 1_400_000, func(vs []artifacts.VisitResult, rows [][]samples.Row) {
			vs[0].Status, vs[1].Status = artifacts.StatusFailed, artifacts.StatusFailed
		}, nil},
		{"one call a sample: no upper side", 1, 4, 1, 400_000_000, nil, nil},
		{"at the cap: no lower side", 100, 4, MaxCalls, 1_400_000, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, rows := calibrated(tt.visits, tt.calls, tt.span)
			if tt.edit != nil {
				tt.edit(vs, rows)
			}
			c := cfg
			c.SampleMs = tt.sampleMs
			if got := Calibration(c, vs, rows); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Calibration(%s) =\n%q\nwant\n%q", tt.name, got, tt.want)
			}
		})
	}
}

// TestVisitGraph: a GPU visit of a replay with graph samples keeps its
// calibration record and config.samples graph samples of batch x R calls
// after its novel samples; every way a record or a row can stray from
// that is named, and a CPU visit or a replay without graphBatch has none.
func TestVisitGraph(t *testing.T) {
	gc := cfg
	gc.GraphBatch, gc.SampleMs, gc.WarmupMs = 32, 100, 500
	graphed := func() (artifacts.VisitResult, []samples.Row) {
		v, rows := gpu()
		v.Graph = &artifacts.GraphRecord{Protocol: visit.GraphProtocol, Batch: 32, FirstNs: 9000, WarmupTargetNs: 500_000_000, WarmupNs: 510_000_000, WarmupReplays: 1023,
			TargetNs: 100_000_000, MaxReplays: visit.MaxGraphReplays, MaxCalls: visit.MaxGraphCalls,
			Attempts: []artifacts.GraphAttempt{{Replays: 1, Ns: 500_000}, {Replays: 200, Ns: 99_000_000}}, Replays: 200}
		for i := range gc.Samples {
			rows = append(rows, samples.Row{Visit: 3, Round: 1, Position: 1, Case: "gemm-16x16x16", Route: "naive", Kind: samples.KindGraph, Index: int32(i),
				Calls: 32 * 200, TotalNs: 100_100_000, TimerNs: 99_500_000, Clock: samples.ClockCUDA})
		}
		return v, rows
	}
	for _, tc := range []struct {
		name   string
		edit   func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row
		cfg    func(c *artifacts.ReplayConfig)
		device string
		want   []string
		own    string // the entry's ownGraphs note
	}{
		{"honest", nil, nil, oracle.DeviceCUDA, nil, ""},
		{"graph sample of other calls", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			rows[len(rows)-1].Calls = 32 * 100
			return rows
		}, nil, oracle.DeviceCUDA, []string{"visit 3: graph sample 1: 3200 calls, graph batch 32 x replays 200"}, ""},
		{"R raised", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.Graph.Replays = 400
			return rows
		}, nil, oracle.DeviceCUDA, []string{"visit 3: graph: replays 400, want the last measured count 200",
			"visit 3: graph sample 0: 6400 calls, graph batch 32 x replays 400", "visit 3: graph sample 1: 6400 calls, graph batch 32 x replays 400"}, ""},
		{"graph sample dropped", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { return rows[:len(rows)-1] }, nil, oracle.DeviceCUDA,
			[]string{"visit 3: 1 graph samples, config.samples 2"}, ""},
		{"no record", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row { v.Graph = nil; return rows }, nil, oracle.DeviceCUDA,
			[]string{"visit 3: no graph record; config.graphBatch 32 asks for graph samples"}, ""},
		// An entry whose calls replay CUDA graphs of their own (the
		// torch-compile route under max-autotune) takes none.
		{"own graphs", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			v.Graph = nil
			return rows[:len(rows)-2]
		}, nil, oracle.DeviceCUDA, nil, "cudagraph trees"},
		{"own graphs, graph samples anyway", nil, nil, oracle.DeviceCUDA,
			[]string{"visit 3: graph record, but the entry's calls replay CUDA graphs of their own (cudagraph trees): replay takes none of it",
				"visit 3: samples row 7: a graph sample, but the entry's calls replay CUDA graphs of their own (cudagraph trees): replay takes none of it",
				"visit 3: samples row 8: a graph sample, but the entry's calls replay CUDA graphs of their own (cudagraph trees): replay takes none of it"}, "cudagraph trees"},
		{"graph samples without graphBatch (an entry with own graphs too)", nil, func(c *artifacts.ReplayConfig) { c.GraphBatch = 0 }, oracle.DeviceCUDA,
			[]string{"visit 3: graph record, but the replay took none (config.graphBatch 0, a cuda case)",
				"visit 3: samples row 7: a graph sample, but the replay took none (config.graphBatch 0, a cuda case)",
				"visit 3: samples row 8: a graph sample, but the replay took none (config.graphBatch 0, a cuda case)"}, "cudagraph trees"},
		{"a CPU visit under graphBatch", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			cv, crows := cpu()
			*v = cv
			return crows
		}, nil, oracle.DeviceCPU, nil, ""},
		{"a graph record on a CPU visit", func(v *artifacts.VisitResult, rows []samples.Row) []samples.Row {
			cv, crows := cpu()
			g := v.Graph
			*v = cv
			v.Graph = g
			return crows
		}, nil, oracle.DeviceCPU, []string{"visit 3: graph record, but the replay took none (config.graphBatch 32, a cpu case)"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, rows := graphed()
			c := gc
			if tc.edit != nil {
				rows = tc.edit(&v, rows)
			}
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			if got := Visit(v, rows, c, tc.device, tc.own, sets.NovelChecks); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Visit(%s) =\n%q\nwant\n%q", tc.name, got, tc.want)
			}
		})
	}
}
