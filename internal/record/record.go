package record

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/stats"
)

// MaxCalls is the most calls replay gives one sample: calibration stops
// doubling there (replay's cap on a sample, which it passes to
// [visit.Plan]).
const MaxCalls = 1 << 30

// MinCalibrated is the fewest passed visits [Calibration] judges: with
// fewer, one preempted calibration sample would decide.
const MinCalibrated = 3

// CalibrationSlack is the factor by which the median visit's batch
// samples may miss what calibration aims at, either way.
const CalibrationSlack = 4

// kinds are the sample kinds replay takes, in the order it takes them.
var kinds = []string{samples.KindEmpty, samples.KindBatch, samples.KindSingle, samples.KindNovel, samples.KindGraph}

// Clock is the span that is the time of a sample of kind on device (a
// case's [oracle.Case.DeviceOf]) under novel rule rule: on a GPU the
// CUDA-event span of the launches, for every sample that launches, but a
// novel sample whose slots the rule stages ([sets.Rule.Staged]), which
// replay's own span times whatever the route; replay's own span
// otherwise.
func Clock(device, kind string, rule sets.Rule) string {
	if device == oracle.DeviceCUDA && kind != samples.KindEmpty && !(kind == samples.KindNovel && rule.Staged(device)) {
		return samples.ClockCUDA
	}
	return samples.ClockReplay
}

// Visit checks a passed visit's record v against its own sample table
// rows and the replay's configuration cfg (see the package doc), for a
// case on device whose novel rule (sets.Rule.Checks) lets a visit judge
// at most limit novel calls, by an entry whose note ownGraphs is given
// ([TakesGraphs]). Each problem names the visit and the field; none
// means the record is one replay's drive could have written.
func Visit(v artifacts.VisitResult, rows []samples.Row, cfg artifacts.ReplayConfig, device, ownGraphs string, limit int64) []string {
	f := &found{visit: v.Index}
	rule, err := sets.RuleOf(cfg.NovelRule)
	if err != nil {
		f.bad("%v", err)
		return f.p
	}
	if v.Threads != cfg.Threads {
		f.bad("threads %d, config.threads %d", v.Threads, cfg.Threads)
	}
	if v.Sets != cfg.Sets {
		f.bad("sets %d, config.sets %d", v.Sets, cfg.Sets)
	}
	n := v.CallsPerSample
	if n < 1 || n > MaxCalls || n&(n-1) != 0 {
		f.bad("callsPerSample %d: calibration doubles the calls from 1 up to %d, so a power of two in that range", n, MaxCalls)
	}
	if v.FreshSets < 1 {
		f.bad("freshSets %d, want at least 1", v.FreshSets)
	}
	// Every visit takes novel samples (visit protocol 4).
	if v.Novel == nil {
		f.bad("no novel record: every visit takes novel samples (visit protocol 4; a replay made before it is re-run, not audited)")
		return f.p
	}
	graph, graphCalls := f.graph(v, cfg, device, ownGraphs)
	count, batch, ok := f.rows(v, rows, cfg, device, rule, graph, graphCalls)
	if !ok {
		return f.p
	}
	for _, c := range []struct {
		kind, field string
		want        int
	}{{samples.KindEmpty, "config.samples", cfg.Samples}, {samples.KindBatch, "config.samples", cfg.Samples}, {samples.KindSingle, "config.singles", cfg.Singles}, {samples.KindNovel, "config.samples", cfg.Samples}, {samples.KindGraph, "config.samples", cfg.Samples}} {
		if c.kind == samples.KindGraph && !graph {
			continue
		}
		if count[c.kind] != c.want {
			f.bad("%d %s samples, %s %d", count[c.kind], c.kind, c.field, c.want)
		}
	}
	f.p = append(f.p, novelRecord(v, cfg, limit)...)
	if len(f.p) > 0 || len(batch) == 0 {
		return f.p
	}
	return append(f.p, order(v, rows, cfg, graph, graphCalls)...)
}

// found is one visit's problems, each naming the visit, and why it takes
// no graph samples (for the rows that say otherwise).
type found struct {
	visit    int
	p        []string
	noGraphs string
}

func (f *found) bad(format string, args ...any) {
	f.p = append(f.p, fmt.Sprintf("visit %d: ", f.visit)+fmt.Sprintf(format, args...))
}

// TakesGraphs says whether a visit takes graph samples: a GPU visit of a
// replay with config.graphBatch, unless its entry's calls replay CUDA
// graphs of their own (ownGraphs, artifacts.Prepared.OwnGraphs: a graph
// around a graph replay is not captured, and the row's own figures are
// graph figures already).
func TakesGraphs(cfg artifacts.ReplayConfig, device, ownGraphs string) bool {
	return cfg.GraphBatch > 0 && device == oracle.DeviceCUDA && ownGraphs == ""
}

// graph checks a visit's graph record against the replay's configuration
// and the entry's ownGraphs: a visit that takes graph samples
// ([TakesGraphs]) takes them after its novel ones, each R replays of a
// graph of N calls, R fixed by the calibration its record keeps
// (visit.CheckGraph). It returns whether the visit takes graph samples,
// and their calls (-1 where unknown).
func (f *found) graph(v artifacts.VisitResult, cfg artifacts.ReplayConfig, device, ownGraphs string) (bool, int64) {
	graph, graphCalls := TakesGraphs(cfg, device, ownGraphs), int64(-1)
	switch {
	case graph:
	case cfg.GraphBatch > 0 && device == oracle.DeviceCUDA:
		f.noGraphs = fmt.Sprintf("the entry's calls replay CUDA graphs of their own (%s): replay takes none of it", ownGraphs)
	default:
		f.noGraphs = fmt.Sprintf("the replay took none (config.graphBatch %d, a %s case)", cfg.GraphBatch, device)
	}
	switch {
	case !graph && v.Graph != nil:
		f.bad("graph record, but %s", f.noGraphs)
	case graph && v.Graph == nil:
		f.bad("no graph record; config.graphBatch %d asks for graph samples", cfg.GraphBatch)
	case graph:
		if why := visit.CheckGraph(v.Graph, int64(cfg.GraphBatch), ms(cfg.SampleMs), ms(cfg.WarmupMs)); why != "" {
			f.bad("graph: %s", why)
		}
		graphCalls = v.Graph.Batch * v.Graph.Replays
	}
	return graph, graphCalls
}

// rows checks every row of the visit's sample table: that it is the
// visit's (else it stops: ok false), its clock (record.Clock by the rule),
// its kind and its calls; it counts the rows by kind and returns the batch
// samples.
func (f *found) rows(v artifacts.VisitResult, rows []samples.Row, cfg artifacts.ReplayConfig, device string, rule sets.Rule, graph bool, graphCalls int64) (map[string]int, []visit.Sample, bool) {
	n := v.CallsPerSample
	count := map[string]int{}
	var batch []visit.Sample
	for i, r := range rows {
		if int(r.Visit) != v.Index || int(r.Round) != v.Round || int(r.Position) != v.Position || r.Case != v.Case || r.Route != v.Route {
			f.bad("samples row %d belongs to visit %d (round %d, position %d, %s %s), not to this one (round %d, position %d, %s %s)",
				i, r.Visit, r.Round, r.Position, r.Case, r.Route, v.Round, v.Position, v.Case, v.Route)
			return nil, nil, false
		}
		if w := Clock(device, r.Kind, rule); r.Clock != w {
			f.bad("%s sample %d: clock %q, want %q for a %s case", r.Kind, r.Index, r.Clock, w, device)
		}
		want := int64(-1) // the calls a sample of the row's kind has, where fixed
		switch r.Kind {
		case samples.KindEmpty:
			want = 0
		case samples.KindBatch:
			want = n
			batch = append(batch, visit.Sample{Kind: r.Kind, Index: int(r.Index), Calls: r.Calls, SpanNs: r.TotalNs, TimerNs: r.TimerNs, Clock: r.Clock})
		case samples.KindSingle:
			want = 1
		case samples.KindNovel:
			want = v.Novel.Calls
		case samples.KindGraph:
			if !graph {
				f.bad("samples row %d: a graph sample, but %s", i, f.noGraphs)
				continue
			}
			want = graphCalls
		default:
			f.bad("samples row %d: kind %q, want one of %s", i, r.Kind, strings.Join(kinds, ", "))
			continue
		}
		count[r.Kind]++
		if want >= 0 && r.Calls != want {
			what := fmt.Sprintf("want %d", want)
			switch r.Kind {
			case samples.KindBatch:
				what = fmt.Sprintf("callsPerSample %d", n)
			case samples.KindGraph:
				what = fmt.Sprintf("graph batch %d x replays %d", v.Graph.Batch, v.Graph.Replays)
			}
			f.bad("%s sample %d: %d calls, %s", r.Kind, r.Index, r.Calls, what)
		}
	}
	return count, batch, true
}

// order checks that rows are in replay's order: the empty, batch and
// single samples, then the novel samples, then any graph samples.
func order(v artifacts.VisitResult, rows []samples.Row, cfg artifacts.ReplayConfig, graph bool, graphCalls int64) []string {
	const what = "empty, batch and single samples, then the novel samples, then any graph samples"
	var p []string
	bad := func(format string, args ...any) {
		p = append(p, fmt.Sprintf("visit %d: ", v.Index)+fmt.Sprintf(format, args...))
	}
	var want []visit.Sample
	for _, k := range []struct {
		kind  string
		count int
		calls int64
	}{{samples.KindEmpty, cfg.Samples, 0}, {samples.KindBatch, cfg.Samples, v.CallsPerSample}, {samples.KindSingle, cfg.Singles, 1}} {
		for i := range k.count {
			want = append(want, visit.Sample{Kind: k.kind, Index: i, Calls: k.calls})
		}
	}
	for i := range v.Novel.Samples {
		want = append(want, visit.Sample{Kind: samples.KindNovel, Index: i, Calls: v.Novel.Calls})
	}
	if graph {
		for i := range cfg.Samples {
			want = append(want, visit.Sample{Kind: samples.KindGraph, Index: i, Calls: graphCalls})
		}
	}
	if len(want) != len(rows) { // the counts hold, so this cannot be
		bad("%d samples, replay takes %d", len(rows), len(want))
		return p
	}
	for i, r := range rows {
		w := want[i]
		if r.Kind != w.Kind || int(r.Index) != w.Index {
			bad("samples row %d is %s sample %d, want %s sample %d (replay's order: %s)", i, r.Kind, r.Index, w.Kind, w.Index, what)
			return p
		}
		if r.Calls != w.Calls {
			bad("%s sample %d: %d calls; for its batch samples and %d fresh sets replay gives %d", r.Kind, r.Index, r.Calls, v.FreshSets, w.Calls)
		}
	}
	return p
}

// novelRecord checks a visit's novel record against its calibration
// and the configuration: config.samples samples of as many calls as the
// warm samples' calibration, within the slots, and in each sample
// visit.ChecksPerSample calls checked (of limit for the visit), in
// increasing order.
func novelRecord(v artifacts.VisitResult, cfg artifacts.ReplayConfig, limit int64) []string {
	var p []string
	bad := func(format string, args ...any) {
		p = append(p, fmt.Sprintf("visit %d: novel ", v.Index)+fmt.Sprintf(format, args...))
	}
	nr := v.Novel
	if nr.Samples != cfg.Samples {
		bad("samples %d, config.samples %d", nr.Samples, cfg.Samples)
	}
	if want := visit.NovelCalls(v.CallsPerSample, v.FreshSets); nr.Calls != want {
		bad("calls %d: the warm samples' %d calls within %d slots (freshSets) give %d", nr.Calls, v.CallsPerSample, v.FreshSets, want)
	}
	if nr.FreezeNs < 0 {
		bad("freezeNs %d: want a duration, 0 or more", nr.FreezeNs)
	}
	if v.FreshCalls != 0 || len(v.FreshOutputs) > 0 {
		bad("record beside %d fresh calls and %d fresh output tensors: visit protocol 4 takes no fresh samples", v.FreshCalls, len(v.FreshOutputs))
	}
	if len(p) > 0 {
		return p
	}
	per := visit.ChecksPerSample(nr.Samples, nr.Calls, limit)
	if int64(len(nr.Checked)) != int64(nr.Samples)*per {
		bad("checked: %d calls, want %d (%d in each of %d samples of %d calls; the case's rule judges %d a visit)", len(nr.Checked), int64(nr.Samples)*per, per, nr.Samples, nr.Calls, limit)
		return p
	}
	for c, g := range nr.Checked {
		sample := int64(c) / per
		if g < sample*nr.Calls || g >= (sample+1)*nr.Calls || c > 0 && g <= nr.Checked[c-1] {
			bad("checked[%d] = %d: want a call of sample %d (%d to %d), above checked[%d]", c, g, sample, sample*nr.Calls, (sample+1)*nr.Calls-1, c-1)
			return p
		}
	}
	return p
}

// Calibration checks the batch samples of a replay's visits against
// config.sampleMs (see the package doc); rows[i] is visits[i]'s sample
// table, and only passed visits count. Calibration doubles a sample's
// calls from 1 and stops at the first that lasts sampleMs, so (below
// [MaxCalls]) a batch sample lasts at least about sampleMs, and (above
// one call) half its calls lasted less than sampleMs, so it lasts less
// than about twice that. The median visit must agree within
// [CalibrationSlack]; the upper side also allows [visit.ClockBase], the
// wait for an answer that the clock cross-check allows too.
func Calibration(cfg artifacts.ReplayConfig, visits []artifacts.VisitResult, rows [][]samples.Row) []string {
	sample := cfg.SampleMs * 1e6
	var long, short []float64
	for i, v := range visits {
		if v.Status != artifacts.StatusPassed || i >= len(rows) {
			continue
		}
		var spans []float64
		for _, r := range rows[i] {
			if r.Kind == samples.KindBatch {
				spans = append(spans, float64(r.TotalNs))
			}
		}
		if len(spans) == 0 {
			continue
		}
		if v.CallsPerSample < MaxCalls {
			long = append(long, stats.Median(spans))
		}
		if v.CallsPerSample > 1 {
			short = append(short, slices.Min(spans))
		}
	}
	var p []string
	if len(long) >= MinCalibrated {
		if m := stats.Median(long); m < sample/CalibrationSlack {
			p = append(p, fmt.Sprintf("batch samples: the median visit's median batch sample lasted %s, less than config.sampleMs %g ms / %d: calibration doubles the calls until a sample lasts sampleMs, and the batch samples repeat them (%d visits below %d calls)",
				dur(m), cfg.SampleMs, CalibrationSlack, len(long), MaxCalls))
		}
	}
	if len(short) >= MinCalibrated {
		bound := CalibrationSlack*2*sample + float64(visit.ClockBase)
		if m := stats.Median(short); m > bound {
			p = append(p, fmt.Sprintf("batch samples: the median visit's fastest batch sample lasted %s, more than %d x 2 x config.sampleMs %g ms + %s: calibration stops at the first doubling that lasts sampleMs, so half the calls lasted less (%d visits of more than one call)",
				dur(m), CalibrationSlack, cfg.SampleMs, visit.ClockBase, len(short)))
		}
	}
	return p
}

func dur(ns float64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// ms is a configuration's milliseconds as a duration.
func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
