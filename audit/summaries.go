package audit

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/adaptive"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/record"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/stats"
)

// summariesCheck recomputes every summary from the raw sample table and the
// per-visit tables.
func summariesCheck(cp *checkpoint, f *facts) finding {
	var p []string
	rows, err := readRows(cp.rep, cp.rdoc.Samples)
	if err != nil {
		return finding{problems: []string{err.Error()}, summary: "could not read the sample table"}
	}
	// The combined table must be exactly the per-visit tables (each
	// checked against its visit's record in records()).
	var union []samples.Row
	_, vrows, unread := f.passedRows()
	p = append(p, unread...)
	for _, vr := range vrows {
		union = append(union, vr...)
	}
	if !slices.Equal(union, rows) {
		p = append(p, fmt.Sprintf("samples.arrow has %d rows, the passed visits' tables have %d (or differ in content)", len(rows), len(union)))
	}
	return checkSummaries(cp, rows, p)
}

// checkSummaries recomputes every summary and paired ratio of the document
// from rows, its sample table, and adds the summaries check with the
// problems p found before.
func checkSummaries(cp *checkpoint, rows []samples.Row, p []string) finding {
	want := recompute(cp.rdoc, rows, cp.device, floors.OfSessions(cp.rdoc.Sessions))
	for _, e := range cp.pdoc.Entries { // the routes check holds each entry's note to its build's
		if w, ok := want[e.Pair()]; ok {
			w.BelowBest, w.OwnGraphs, w.Cold = e.BelowBest, e.OwnGraphs, e.Cold
			want[e.Pair()] = w
		}
	}
	have := map[artifacts.Pair]artifacts.Summary{}
	for _, s := range cp.rdoc.Summary {
		have[s.Pair()] = s
	}
	for k, w := range want {
		h, ok := have[k]
		if !ok {
			p = append(p, fmt.Sprintf("summary %s/%s missing", k.Case, k.Route))
			continue
		}
		for _, f := range []struct {
			name   string
			hv, wv float64
		}{{"medianNs", h.MedianNs, w.MedianNs}, {"minNs", h.MinNs, w.MinNs}, {"maxNs", h.MaxNs, w.MaxNs}, {"q1Ns", h.Q1Ns, w.Q1Ns}, {"q3Ns", h.Q3Ns, w.Q3Ns}, {"channelNs", h.ChannelNs, w.ChannelNs}, {"stageNs", h.StageNs, w.StageNs}, {"graphNs", h.GraphNs, w.GraphNs}, {"graphMinNs", h.GraphMinNs, w.GraphMinNs}, {"warmNs", h.WarmNs, w.WarmNs}, {"singleNs", h.SingleNs, w.SingleNs}, {"ratio", h.Ratio, w.Ratio}, {"ratioMin", h.RatioMin, w.RatioMin}, {"ratioMax", h.RatioMax, w.RatioMax}, {"ratioLo", h.RatioLo, w.RatioLo}, {"ratioHi", h.RatioHi, w.RatioHi}, {"precision", h.Precision, w.Precision}} {
			if !near(f.hv, f.wv) {
				p = append(p, fmt.Sprintf("summary %s/%s %s: stored %g, recomputed %g", k.Case, k.Route, f.name, f.hv, f.wv))
			}
		}
		for _, n := range [][3]string{{"belowBest", h.BelowBest, w.BelowBest}, {"ownGraphs", h.OwnGraphs, w.OwnGraphs}} {
			if n[1] != n[2] {
				p = append(p, fmt.Sprintf("summary %s/%s %s: stored %q, the prepared entry says %q", k.Case, k.Route, n[0], n[1], n[2]))
			}
		}
		if !h.Cold.Same(w.Cold) {
			p = append(p, fmt.Sprintf("summary %s/%s cold: stored %s, the prepared entry says %s", k.Case, k.Route, coldString(h.Cold), coldString(w.Cold)))
		}
		if h.Kind != w.Kind {
			p = append(p, fmt.Sprintf("summary %s/%s kind: stored %q, recomputed %q (a CPU row rests on novel samples, a GPU row on batch samples)", k.Case, k.Route, h.Kind, w.Kind))
		}
		if h.Samples != w.Samples || h.Verdict != w.Verdict || h.Flagged != w.Flagged || h.RatioExcluded != w.RatioExcluded {
			p = append(p, fmt.Sprintf("summary %s/%s: stored samples %d verdict %q flagged %d ratioExcluded %d, recomputed %d %q %d %d", k.Case, k.Route, h.Samples, h.Verdict, h.Flagged, h.RatioExcluded, w.Samples, w.Verdict, w.Flagged, w.RatioExcluded))
		}
	}
	var w []string
	switch l := cp.rdoc.Config.Load; l {
	case artifacts.LoadExclude, artifacts.LoadAllow:
	case "":
		n := 0
		for _, v := range cp.rdoc.Visits {
			if v.Load != nil && v.Load.Loaded {
				n++
			}
		}
		if n > 0 {
			w = append(w, fmt.Sprintf("%d visits overlapped other load and config.load is absent (a replay made before the load rule): their rounds are kept in the paired ratios", n))
		}
	default:
		p = append(p, fmt.Sprintf("config.load %q: want %q or %q", l, artifacts.LoadExclude, artifacts.LoadAllow))
	}
	if l := cp.rdoc.Config.Level; l != 0 && l != artifacts.LevelFor(cp.rdoc.Config.Target) {
		p = append(p, fmt.Sprintf("config.level %g: the rule gives %g to a replay of target %g (or absent, in a replay made before it)", l, artifacts.LevelFor(cp.rdoc.Config.Target), cp.rdoc.Config.Target))
	}
	switch _, err := stats.PairedRatios(cp.rdoc.Config.Interval, cp.rdoc.Config.IntervalLevel(), nil, 0, 0); {
	case err != nil:
		p = append(p, "config."+err.Error())
	case cp.rdoc.Config.Interval == stats.IntervalBootstrap:
		w = append(w, "the paired ratios' intervals are the percentile bootstrap of a replay made before exact intervals (config.interval absent): below about 10 rounds it calls identical binaries different more often than 5% (1 in 8 at 4 rounds, docs/statistics.md)")
	}
	return finding{problems: p, warnings: w, summary: fmt.Sprintf("recomputed %d summaries and paired ratios from %d raw samples", len(want), len(rows))}
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func countKind(rows []samples.Row, kind string) int {
	n := 0
	for _, r := range rows {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

func readRows(st *artifacts.Stage, d artifacts.Digest) ([]samples.Row, error) {
	if !st.Has(d) {
		return nil, fmt.Errorf("sample table %s is not a layer of the replay", artifacts.Short(d))
	}
	return samples.ReadFile(st.Store.Path(d), nil)
}

// recompute derives the timing summaries of passed (case, route) pairs
// from raw rows, written independently of replay's code path, judging
// rows by the floors fl as replay did (nil: by none, as an adaptive
// replay's stopping decisions).
func recompute(doc artifacts.ReplayDoc, rows []samples.Row, device func(id string) string, fl map[string]artifacts.CaseFloor) map[artifacts.Pair]artifacts.Summary {
	failed := map[artifacts.Pair]bool{}
	loaded := map[[3]string]bool{} // (case, route, round) left out of ratios
	for _, v := range doc.Visits {
		if v.Status != artifacts.StatusPassed {
			failed[v.Pair()] = true
		}
		if doc.Config.Load == artifacts.LoadExclude && v.Load != nil && v.Load.Loaded {
			loaded[[3]string{v.Case, v.Route, fmt.Sprint(v.Round)}] = true
		}
	}
	times := pairTimesOf(doc, rows, device, failed)
	// A row whose fastest sample beats its case's floor (fl) failed in
	// replay (replay.Summaries): it keeps its statistics but gets no ratio,
	// and neither does any row it is the baseline of.
	out := map[artifacts.Pair]artifacts.Summary{}
	below := map[artifacts.Pair]bool{}
	for k, t := range times {
		if len(t.novel) == 0 {
			continue
		}
		sum := t.summary(k, doc.Config.NovelRule >= int(sets.Rule2), doc.Config.Stage)
		if f, ok := fl[k.Case]; ok {
			below[k] = floors.Below(f, floors.Fastest(sum)) != ""
		}
		out[k] = sum
	}
	for k, sum := range out {
		base := artifacts.Pair{Case: k.Case, Route: doc.Config.Baseline}
		if k.Route != doc.Config.Baseline && out[base].Samples > 0 && !below[k] && !below[base] {
			ratioOf(&sum, times[k].rounds, times[base].rounds, func(rd int32) bool {
				return loaded[[3]string{k.Case, k.Route, fmt.Sprint(rd)}] || loaded[[3]string{base.Case, base.Route, fmt.Sprint(rd)}]
			}, doc.Config)
		}
		out[k] = sum
	}
	return out
}

// pairTimes: one (case, route)'s per-call times by sample kind, from
// the rows of its passed visits.
type pairTimes struct {
	novel, channel, graph, warm, single []float64
	stage                               []float64           // novel samples on replay's clock: span − timer
	rounds                              map[int32][]float64 // novel, by round
	flagged                             int
}

// pairTimesOf sorts the rows of pairs with no failed visit into their
// pairTimes.
func pairTimesOf(doc artifacts.ReplayDoc, rows []samples.Row, device func(id string) string, failed map[artifacts.Pair]bool) map[artifacts.Pair]*pairTimes {
	rule, _ := sets.RuleOf(doc.Config.NovelRule) // an unknown rule is the records check's problem
	times := map[artifacts.Pair]*pairTimes{}
	for _, r := range rows {
		k := artifacts.Pair{Case: r.Case, Route: r.Route}
		if failed[k] {
			continue
		}
		t := times[k]
		if t == nil {
			t = &pairTimes{rounds: map[int32][]float64{}}
			times[k] = t
		}
		if r.Flags != "" {
			t.flagged++
		}
		// A row's claim rests on its novel samples (visit protocol 4); its
		// batch samples are the warm figure. A GPU sample's time is its
		// CUDA-event span, but a staged novel sample's (novel rule 3) is
		// replay's (records() checks every row's clock against its case's
		// device and the rule).
		ns := r.TotalNs
		if record.Clock(device(r.Case), r.Kind, rule) == samples.ClockCUDA {
			ns = r.TimerNs
		}
		per := float64(ns) / float64(r.Calls)
		switch r.Kind {
		case samples.KindEmpty:
			t.channel = append(t.channel, float64(r.TotalNs))
		case samples.KindGraph:
			t.graph = append(t.graph, float64(r.TimerNs)/float64(r.Calls)) // a graph sample is GPU-timed
		case samples.KindBatch:
			t.warm = append(t.warm, per)
		case samples.KindSingle:
			t.single = append(t.single, per)
		case samples.KindNovel:
			t.novel = append(t.novel, per)
			t.rounds[r.Round] = append(t.rounds[r.Round], per)
			if ns == r.TotalNs && r.TimerNs > 0 { // on replay's clock: the stage beyond the timer
				t.stage = append(t.stage, float64(r.TotalNs-r.TimerNs))
			}
		}
	}
	return times
}

// summary: the pair's statistics, its single-call figure only where the
// novel rule records one (withSingle), its stage only where the replay
// records one (withStage: config.stage).
func (t *pairTimes) summary(k artifacts.Pair, withSingle, withStage bool) artifacts.Summary {
	s := stats.Summarize(t.novel)
	sum := artifacts.Summary{Case: k.Case, Route: k.Route, Kind: samples.KindNovel, Samples: s.N, MedianNs: s.Median, MinNs: s.Min, MaxNs: s.Max, Q1Ns: s.Q1, Q3Ns: s.Q3, Flagged: t.flagged}
	if len(t.channel) > 0 {
		sum.ChannelNs = stats.Median(t.channel)
	}
	if len(t.warm) > 0 {
		sum.WarmNs = stats.Median(t.warm)
	}
	if len(t.single) > 0 && withSingle {
		sum.SingleNs = stats.Median(t.single)
	}
	if len(t.stage) > 0 && withStage {
		sum.StageNs = stats.Median(t.stage)
	}
	if len(t.graph) > 0 {
		sum.GraphNs, sum.GraphMinNs = stats.Median(t.graph), slices.Min(t.graph)
	}
	return sum
}

// ratioOf recomputes sum's paired ratio against its baseline from the
// two rows' per-round novel times (mine, theirs), the rounds both have,
// in order, but those out (loaded), with its interval and verdict.
func ratioOf(sum *artifacts.Summary, mine, theirs map[int32][]float64, out func(round int32) bool, cfg artifacts.ReplayConfig) {
	var ids []int
	for rd := range mine {
		if _, ok := theirs[rd]; ok {
			ids = append(ids, int(rd))
		}
	}
	sort.Ints(ids)
	var ratios []float64
	for _, rd := range ids {
		if out(int32(rd)) {
			sum.RatioExcluded++
			continue
		}
		ratios = append(ratios, stats.Median(mine[int32(rd)])/stats.Median(theirs[int32(rd)]))
	}
	if len(ratios) == 0 {
		sum.Verdict = stats.TooFew
		return
	}
	r, err := stats.PairedRatios(cfg.Interval, cfg.IntervalLevel(), ratios, cfg.Bootstrap, cfg.Seed)
	if err != nil {
		r = stats.Ratio{N: len(ratios), Exact: true} // no interval, no verdict; the summaries check names the interval
	}
	sum.Ratio, sum.RatioMin, sum.RatioMax, sum.RatioLo, sum.RatioHi, sum.Verdict = r.Median, r.Min, r.Max, r.Lo, r.Hi, r.Verdict()
	if cfg.Target > 0 {
		sum.Precision = adaptive.Precision(r.Median, r.Lo, r.Hi, r.Coverage > 0)
	}
}
