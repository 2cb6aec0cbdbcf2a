package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/crashpoint"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/adaptive"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/report"
	"github.com/tilepipe/tilepipe/stats"
)

// finish writes the sample table, the summaries and the results table,
// and commits the stage.
func (r *replayer) finish(pr artifacts.PlanRecord, done map[int]*artifacts.VisitResult, closures []artifacts.ClosureCheck, stops []artifacts.CaseStop) (*Result, error) {
	doc := artifacts.ReplayDoc{Schema: artifacts.DocSchema, Prepared: pr.Prepared, Capture: pr.Capture, Config: pr.Config,
		Routes: pr.Routes, Cases: pr.Cases, Plan: pr.Plan, Inputs: pr.Inputs, Sandbox: r.sandbox.Record(), CPULimit: r.cpuLimit, Sessions: r.sessions, Closure: closures, Stops: stops}
	var all []samples.Row
	res := &Result{}
	for _, v := range pr.Plan {
		vr, ok := done[v.Index]
		if !ok {
			// Only a failed closure check stops a replay early; the visits
			// it prevented are kept as failures.
			vr = &artifacts.VisitResult{Visit: v, Status: artifacts.StatusFailed, Reason: artifacts.NotRunClosure}
		}
		doc.Visits = append(doc.Visits, *vr)
		if vr.Status != artifacts.StatusPassed {
			continue
		}
		rows, err := r.readSamples(vr.Samples)
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	sd, err := artifacts.PutSamples(r.s, all)
	if err != nil {
		return nil, err
	}
	r.s.Name("samples.arrow", sd)
	doc.Samples = sd.Digest
	doc.Summary = Summaries(pr.Cases, pr.Routes, r.pdoc.Entries, doc.Visits, all, pr.Config, floors.OfSessions(r.sessions))
	res.Failed = failures(doc)
	md, err := r.s.PutBytes([]byte(report.Table(doc)), artifacts.MediaMarkdown)
	if err != nil {
		return nil, err
	}
	r.s.Name("results.md", md)
	for _, f := range []string{planFile, journalFile} {
		d, err := r.s.PutFile(filepath.Join(r.s.Dir(), f), artifacts.MediaJSON)
		if err != nil {
			return nil, err
		}
		r.s.Name(f, d)
	}
	if err := r.journal.Close(); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(r.s.Dir(), workDir)); err != nil {
		return nil, err
	}
	r.rec.ResolvedDependencies = r.deps.List()
	subject := r.prep.Descriptor
	subject.Annotations = nil
	crashpoint.Hit("finish")
	mdesc, err := r.s.Finish(artifacts.ReplayType, doc, r.rec, &subject, r.cfg.Key)
	if err != nil {
		return nil, err
	}
	// They are layers now: the committed stage is its OCI layout alone.
	for _, f := range []string{planFile, journalFile} {
		if err := os.Remove(filepath.Join(r.s.Dir(), f)); err != nil {
			return nil, err
		}
	}
	res.Manifest, res.Doc = mdesc.Digest, doc
	return res, nil
}

// failures counts a replay document's failed visits, closure checks and
// rows: what exit 1 reports.
func failures(doc artifacts.ReplayDoc) int {
	n := 0
	for _, v := range doc.Visits {
		if v.Status != artifacts.StatusPassed {
			n++
		}
	}
	for _, c := range doc.Closure {
		if c.Status != artifacts.StatusPassed {
			n++
		}
	}
	for _, s := range doc.Summary {
		if s.Status == artifacts.StatusFailed {
			n++
		}
	}
	return n
}

// Summaries summarizes every (case, route) of the prepared stage: timing
// order statistics over all novel samples' per-op times (its batch
// samples' median is the warm figure), and the paired
// ratio against the baseline from per-round medians. Rows that were not
// timed, or had a failed visit, carry their status and reason; so does a
// row whose fastest sample is below its case's physical floor (fl).
func Summaries(cases, routes []string, entries []artifacts.Prepared, visits []artifacts.VisitResult, rows []samples.Row, cfg artifacts.ReplayConfig, fl map[string]artifacts.CaseFloor) []artifacts.Summary {
	g := gather(rows)
	visitsOf := map[artifacts.Pair][]artifacts.VisitResult{}
	loaded := map[artifacts.Pair]map[int32]bool{} // rounds left out of ratios (config.load)
	for _, v := range visits {
		k := v.Pair()
		visitsOf[k] = append(visitsOf[k], v)
		if v.Load != nil && v.Load.Loaded && cfg.Load == artifacts.LoadExclude {
			if loaded[k] == nil {
				loaded[k] = map[int32]bool{}
			}
			loaded[k][int32(v.Round)] = true
		}
	}
	entry := map[artifacts.Pair]artifacts.Prepared{}
	for _, e := range entries {
		entry[e.Pair()] = e
	}
	var out []artifacts.Summary
	for _, c := range cases {
		for _, rt := range routes {
			k := artifacts.Pair{Case: c, Route: rt}
			if e, ok := entry[k]; ok {
				out = append(out, g.summary(k, e, visitsOf[k], cfg, fl))
			}
		}
	}
	pairRatios(out, g.perRound, loaded, cfg)
	return out
}

// gathered is a replay's samples by (case, route) and kind, each a time
// per call but the empty samples' spans (the channel). A row's claim
// rests on its novel samples (visit protocol 4), per round for its ratio;
// its batch samples are the warm figure.
type gathered struct {
	perop, channel, graph, warm, single map[artifacts.Pair][]float64
	stage                               map[artifacts.Pair][]float64 // novel samples' span − timer
	perRound                            map[artifacts.Pair]map[int32][]float64
	flagged                             map[artifacts.Pair]int
}

func gather(rows []samples.Row) gathered {
	g := gathered{perop: map[artifacts.Pair][]float64{}, channel: map[artifacts.Pair][]float64{}, graph: map[artifacts.Pair][]float64{},
		warm: map[artifacts.Pair][]float64{}, single: map[artifacts.Pair][]float64{}, stage: map[artifacts.Pair][]float64{}, perRound: map[artifacts.Pair]map[int32][]float64{}, flagged: map[artifacts.Pair]int{}}
	for _, row := range rows {
		k := artifacts.Pair{Case: row.Case, Route: row.Route}
		if row.Flags != "" {
			g.flagged[k]++
		}
		switch row.Kind {
		case samples.KindEmpty:
			g.channel[k] = append(g.channel[k], float64(row.TotalNs))
		case samples.KindGraph:
			g.graph[k] = append(g.graph[k], row.PerOpNs())
		case samples.KindBatch:
			g.warm[k] = append(g.warm[k], row.PerOpNs())
		case samples.KindSingle:
			g.single[k] = append(g.single[k], row.PerOpNs())
		case samples.KindNovel:
			g.perop[k] = append(g.perop[k], row.PerOpNs())
			if row.Clock == samples.ClockReplay && row.TimerNs > 0 {
				g.stage[k] = append(g.stage[k], float64(row.TotalNs-row.TimerNs))
			}
			if g.perRound[k] == nil {
				g.perRound[k] = map[int32][]float64{}
			}
			g.perRound[k][row.Round] = append(g.perRound[k][row.Round], row.PerOpNs())
		}
	}
	return g
}

// summary is (case, route) k's row: its entry's status, failed by its
// first failed visit (or none), its times, and failed again by its floor.
func (g gathered) summary(k artifacts.Pair, e artifacts.Prepared, visits []artifacts.VisitResult, cfg artifacts.ReplayConfig, fl map[string]artifacts.CaseFloor) artifacts.Summary {
	s := artifacts.Summary{Case: k.Case, Route: k.Route, Status: e.Status, Reason: e.Reason, Visits: len(visits), BelowBest: e.BelowBest, OwnGraphs: e.OwnGraphs, Cold: e.Cold}
	if e.Status == artifacts.StatusPrepared {
		s.Status = artifacts.StatusPassed
		for _, v := range visits {
			if v.Status != artifacts.StatusPassed {
				s.Status, s.Reason = artifacts.StatusFailed, fmt.Sprintf("visit %d (round %d): %s", v.Index, v.Round+1, v.Reason)
				break
			}
		}
		if s.Visits == 0 {
			s.Status, s.Reason = artifacts.StatusFailed, "no visits"
		}
	}
	if s.Status != artifacts.StatusPassed {
		return s
	}
	sum := stats.Summarize(g.perop[k])
	s.Kind = samples.KindNovel
	if len(g.warm[k]) > 0 {
		s.WarmNs = stats.Median(g.warm[k])
	}
	if len(g.single[k]) > 0 && cfg.NovelRule >= int(sets.Rule2) {
		s.SingleNs = stats.Median(g.single[k])
	}
	s.Samples, s.MedianNs, s.MinNs, s.MaxNs, s.Q1Ns, s.Q3Ns = sum.N, sum.Median, sum.Min, sum.Max, sum.Q1, sum.Q3
	if len(g.channel[k]) > 0 {
		s.ChannelNs = stats.Median(g.channel[k])
	}
	if len(g.stage[k]) > 0 && cfg.Stage {
		s.StageNs = stats.Median(g.stage[k])
	}
	if len(g.graph[k]) > 0 {
		s.GraphNs, s.GraphMinNs = stats.Median(g.graph[k]), slices.Min(g.graph[k])
	}
	s.Flagged = g.flagged[k]
	if f, ok := fl[k.Case]; ok {
		if why := floors.Below(f, floors.Fastest(s)); why != "" {
			s.Status, s.Reason = artifacts.StatusFailed, why
		}
	}
	return s
}

// pairRatios gives every passed row but the baseline's its paired ratio
// against the baseline of its case, per round (rounds either visit was
// loaded in left out), with its interval and verdict.
func pairRatios(out []artifacts.Summary, perRound map[artifacts.Pair]map[int32][]float64, loaded map[artifacts.Pair]map[int32]bool, cfg artifacts.ReplayConfig) {
	base := map[string]artifacts.Summary{}
	for _, s := range out {
		if s.Route == cfg.Baseline {
			base[s.Case] = s
		}
	}
	for i := range out {
		s := &out[i]
		b, ok := base[s.Case]
		if cfg.Baseline == "" || s.Route == cfg.Baseline || s.Status != artifacts.StatusPassed || !ok || b.Status != artifacts.StatusPassed {
			continue
		}
		var ratios []float64
		bk := artifacts.Pair{Case: s.Case, Route: cfg.Baseline}
		mine, theirs := perRound[s.Pair()], perRound[bk]
		rounds := make([]int, 0, len(mine))
		for rd := range mine {
			rounds = append(rounds, int(rd))
		}
		sort.Ints(rounds)
		for _, rd := range rounds {
			t, ok := theirs[int32(rd)]
			switch {
			case !ok:
			case loaded[s.Pair()][int32(rd)] || loaded[bk][int32(rd)]:
				s.RatioExcluded++
			default:
				ratios = append(ratios, stats.Median(mine[int32(rd)])/stats.Median(t))
			}
		}
		if len(ratios) == 0 { // every round left out (load), or no round in common
			s.Verdict = stats.TooFew
			continue
		}
		rr, err := stats.PairedRatios(cfg.Interval, cfg.IntervalLevel(), ratios, cfg.Bootstrap, cfg.Seed)
		if err != nil {
			rr = stats.Ratio{N: len(ratios), Exact: true} // no interval, no verdict; Validate refused it before any visit
		}
		s.Ratio, s.RatioMin, s.RatioMax, s.RatioLo, s.RatioHi, s.RatioPairs, s.Verdict = rr.Median, rr.Min, rr.Max, rr.Lo, rr.Hi, rr.N, rr.Verdict()
		if cfg.Target > 0 {
			s.Precision = adaptive.Precision(rr.Median, rr.Lo, rr.Hi, rr.Coverage > 0)
		}
	}
}
