// Package report renders checkpoint documents for people: the results
// table a replay writes as results.md (and that the audit renders again
// and compares byte for byte).
package report

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/adaptive"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/load"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/stats"
)

// novelNote says what a novel row's times are, where the table has one.
func novelNote(sums []artifacts.Summary) string {
	for _, s := range sums {
		if s.Kind == samples.KindNovel {
			return " A row's times and ratio are its novel samples' (visit protocol 4, docs/protocol.md): each call on inputs replay wrote while the visit was frozen (on a GPU, copied to the device before the sample's first event), its outputs checked; the same calls on warm inputs, again and again, are listed below the table."
		}
	}
	return ""
}

// warm lists the novel rows' warm figure: the median time per call of
// their batch samples (the same inputs again and again), beside the claim.
func warm(sums []artifacts.Summary) string {
	var b strings.Builder
	for _, s := range sums {
		if s.Kind == samples.KindNovel && s.Status == artifacts.StatusPassed && s.WarmNs > 0 {
			if b.Len() == 0 {
				b.WriteString("\nWarm figure (a secondary number, never the claim): the median time per call of each row's batch samples, its warm sets called again and again.\n\n| case | route | novel median per op | warm median per op | novel / warm |\n|---|---|---:|---:|---:|\n")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f |\n", s.Case, s.Route, Duration(s.MedianNs), Duration(s.WarmNs), s.MedianNs/s.WarmNs)
		}
	}
	return b.String()
}

// bracket is each CPU novel row's bracket share. A novel sample's span
// holds, beside its N calls, one thaw-and-freeze cycle of the visit
// (novel.freezeNs: the median of the idle cycles after its last sample)
// and one channel round trip (the row's channel), so (freeze + channel) /
// (N × median per call) of the row's novel time is the protocol's own. ""
// when no visit recorded its freeze cycles (replays made before it). A
// GPU row with a stage (Summary.StageNs) is stageCost's instead: its span
// also maps and unmaps the staged slots, which freeze and channel miss.
func bracket(doc artifacts.ReplayDoc) string {
	freeze, calls := map[artifacts.Pair][]float64{}, map[artifacts.Pair][]float64{}
	gpu := gpuRows(doc)
	for _, v := range doc.Visits {
		if v.Status != artifacts.StatusPassed || v.Novel == nil || v.Novel.FreezeNs <= 0 {
			continue
		}
		k := v.Pair()
		freeze[k] = append(freeze[k], float64(v.Novel.FreezeNs))
		calls[k] = append(calls[k], float64(v.Novel.Calls))
	}
	var b strings.Builder
	for _, s := range doc.Summary {
		k := s.Pair()
		if s.Kind != samples.KindNovel || s.Status != artifacts.StatusPassed || len(freeze[k]) == 0 || s.MedianNs <= 0 || (gpu[k] && s.StageNs > 0) {
			continue // a GPU row with a stage is stageCost's: its span holds more than freeze and channel
		}
		if b.Len() == 0 {
			b.WriteString("\nNovel bracket (rows timed by replay's clock): each novel sample's span holds, beside its N calls, one thaw-and-freeze cycle of the visit (median of its idle cycles after the last sample) and one channel round trip; their share of the row's novel time is the protocol's own cost in the claim, larger where N is small and for a route with more to freeze (docs/protocol.md).\n\n| case | route | calls a sample (N) | freeze cycle | channel | share of novel time |\n|---|---|---:|---:|---:|---:|\n")
		}
		fz, n := stats.Median(freeze[k]), stats.Median(calls[k])
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.1f%% |\n", s.Case, s.Route, n, Duration(fz), Duration(s.ChannelNs), 100*(fz+s.ChannelNs)/(n*s.MedianNs))
	}
	return b.String()
}

// gpuRows are the (case, route) pairs whose visits ran the GPU's idle
// probes: GPU rows.
func gpuRows(doc artifacts.ReplayDoc) map[artifacts.Pair]bool {
	gpu := map[artifacts.Pair]bool{}
	for _, v := range doc.Visits {
		if v.GPUIdle != nil {
			gpu[v.Pair()] = true
		}
	}
	return gpu
}

// stageCost is each passed GPU novel row's stage (Summary.StageNs: the
// median of its novel samples' span beyond the timer's number; a row is a
// GPU row when its visits ran the GPU's idle probes). On a GPU the
// stage maps the staged slots into the timer's context and unmaps them
// inside the span, a cost that grows with the bytes a sample stages; its
// share of the row's novel time, stage / (N × median per call), is the
// protocol's own cost in the claim, and a row above half is marked. A row
// with a ratio gets the stages' factor in it, (1 − the baseline's share) /
// (1 − the row's share): the ratio of the calls alone times the factor is
// the published ratio, so a factor below 1 is the stages favouring the row.
func stageCost(doc artifacts.ReplayDoc) string {
	calls := map[artifacts.Pair][]float64{}
	gpu := gpuRows(doc)
	for _, v := range doc.Visits {
		if v.Status == artifacts.StatusPassed && v.Novel != nil {
			calls[v.Pair()] = append(calls[v.Pair()], float64(v.Novel.Calls))
		}
	}
	share := map[artifacts.Pair]float64{}
	for _, s := range doc.Summary {
		k := s.Pair()
		if s.Kind == samples.KindNovel && s.Status == artifacts.StatusPassed && s.StageNs > 0 && s.MedianNs > 0 && gpu[k] && len(calls[k]) > 0 {
			share[k] = min(1, s.StageNs/(stats.Median(calls[k])*s.MedianNs))
		}
	}
	var b strings.Builder
	most := 0
	for _, s := range doc.Summary {
		k := s.Pair()
		sh, ok := share[k]
		if !ok {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nStage cost (GPU rows): each novel sample's span holds, beside its N calls, what the timer's own number does not: mapping the staged slots into the timer's context and unmapping them, the channel, the freeze and the closing idle probe (docs/gpu-clock.md). It grows with the bytes a sample stages and differs between routes (a torch process has more to freeze). Its share of the row's novel time is the protocol's own cost in the claim; above half, the row is marked: read its warm and graph figures beside it. The stages' factor in a ratio is (1 − the baseline's share) / (1 − the row's share): the published ratio is the calls' ratio times it, so below 1 the stages favour the row, above 1 the baseline.\n\n| case | route | calls a sample (N) | span beyond the timer | per call | share of novel time | stages' factor in the ratio |\n|---|---|---:|---:|---:|---:|---:|\n")
		}
		n := stats.Median(calls[k])
		mark, factor := "", "-"
		if sh > 0.5 {
			mark, most = " (mostly the stage)", most+1
		}
		if sb, ok := share[artifacts.Pair{Case: s.Case, Route: doc.Config.Baseline}]; ok && s.RatioPairs > 0 && sh < 1 {
			factor = fmt.Sprintf("%.3f", (1-sb)/(1-sh))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.1f%%%s | %s |\n", s.Case, s.Route, n, Duration(s.StageNs), Duration(s.StageNs/n), 100*sh, mark, factor)
	}
	if most > 0 {
		fmt.Fprintf(&b, "\n%d of these rows' novel time is mostly the stage's own cost.\n", most)
	}
	return b.String()
}

// fixedCost is each GPU novel row's launch fixed cost under novel rule 2
// (rows with singleNs): a single-call sample from an idle GPU takes
// singleNs, a call in a batch warmNs, so a sample pays about singleNs −
// warmNs once beside its N calls (host time to the first kernel, the
// synchronisation before the second event); its share of the row's novel
// time says how far the claim is a latency rather than a throughput.
func fixedCost(doc artifacts.ReplayDoc) string {
	gpu := map[string]bool{}
	for _, s := range doc.Sessions {
		for _, f := range s.Floors {
			if f.Device == oracle.DeviceCUDA {
				gpu[f.Case] = true
			}
		}
	}
	calls := map[artifacts.Pair][]float64{}
	for _, v := range doc.Visits {
		if v.Status == artifacts.StatusPassed && v.Novel != nil {
			k := v.Pair()
			calls[k] = append(calls[k], float64(v.Novel.Calls))
		}
	}
	var b strings.Builder
	for _, s := range doc.Summary {
		k := s.Pair()
		if s.Kind != samples.KindNovel || s.Status != artifacts.StatusPassed || !gpu[s.Case] || s.SingleNs <= 0 || s.WarmNs <= 0 || s.MedianNs <= 0 || len(calls[k]) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nLaunch fixed cost (GPU rows): a novel sample of N calls pays once what a call alone from an idle GPU costs beyond a call in a batch (single − warm: host time to the first kernel, the synchronisation before the second event); its share of the row's novel time is how far the row's claim is one launch's latency rather than N calls' throughput (docs/protocol.md, novel rule 2).\n\n| case | route | calls a sample (N) | single call | warm call | fixed cost | share of novel time |\n|---|---|---:|---:|---:|---:|---:|\n")
		}
		n, f := stats.Median(calls[k]), max(0, s.SingleNs-s.WarmNs)
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %.1f%% |\n", s.Case, s.Route, n, Duration(s.SingleNs), Duration(s.WarmNs), Duration(f), 100*min(1, f/(n*s.MedianNs)))
	}
	return b.String()
}

// coldCosts is the cold costs of the rows whose build measured them (a
// JIT route: torch-compile), apart from every timed figure: capture-time
// seconds, on the capture's machine, never in a median or a ratio.
func coldCosts(sums []artifacts.Summary) string {
	var b strings.Builder
	for _, s := range sums {
		if s.Cold == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nCold costs (JIT routes), measured once at capture in the build sandbox, on the capture's machine; never part of a timed figure: the first call of a process with an empty cache (trace, compile, autotune, first run), and of a fresh process given the captured cache (load, first run), beside the row's median per op.\n\n| case | route | first call, empty cache | first call, captured cache | median per op |\n|---|---|---:|---:|---:|\n")
		}
		med := "-"
		if s.Status == artifacts.StatusPassed {
			med = Duration(s.MedianNs)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.Case, s.Route, Duration(s.Cold.CompileFirstCallS*1e9), Duration(s.Cold.CachedFirstCallS*1e9), med)
	}
	return b.String()
}

// judged is each novel row's judged calls: c, the novel calls of its
// passed visits replay judged in full, drawn after each sample; a route
// that fakes a fraction f of the row's novel calls escapes every one of
// them with probability at most e^(−c·f) (docs/threat-model.md, "Each
// call's own output"), and is caught with probability 99% or more from
// f = ln(100)/c. Replays made under novel rule 1 (every visit judged up
// to 700 calls) render without it, as they did.
func judged(doc artifacts.ReplayDoc) string {
	if doc.Config.NovelRule < 2 {
		return ""
	}
	checked, timed := map[artifacts.Pair]int64{}, map[artifacts.Pair]int64{}
	for _, v := range doc.Visits {
		if v.Status == artifacts.StatusPassed && v.Novel != nil {
			k := v.Pair()
			checked[k] += int64(len(v.Novel.Checked))
			timed[k] += int64(v.Novel.Samples) * v.Novel.Calls
		}
	}
	var b strings.Builder
	for _, s := range doc.Summary {
		k := s.Pair()
		c := checked[k]
		if s.Kind != samples.KindNovel || s.Status != artifacts.StatusPassed || c == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nJudged calls: each row's novel calls judged in full against the FP64 oracle (c, over its passed visits, drawn after each sample), of those timed; a route faking a fraction f of them escapes every check with probability at most e^(−c·f) (docs/threat-model.md).\n\n| case | route | judged (c) | timed | escape at f = 10% | f caught at 99% |\n|---|---|---:|---:|---:|---:|\n")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %.2g | %.3g%% |\n", s.Case, s.Route, c, timed[k], math.Exp(-0.1*float64(c)), min(100, 100*math.Log(100)/float64(c)))
	}
	return b.String()
}

// clockNote says which span is a sample's time under the replay's novel
// rule (record.Clock).
func clockNote(rule int) string {
	if rule < int(sets.Rule3) {
		return "A sample's time is replay's own span of it, except on a GPU: there it is the CUDA-event span of the launches, which must lie inside replay's span"
	}
	return "A sample's time is replay's own span of it, and so is a GPU novel sample's (the claim: its slots staged on the device by replay's monitor, outside the visit, docs/gpu-clock.md); a GPU batch, single or graph sample's is the CUDA-event span of its launches, which must lie inside replay's span"
}

// Table renders the summaries as a markdown table, for people.
func Table(doc artifacts.ReplayDoc) string {
	var b bytes.Buffer
	c := doc.Config
	fmt.Fprintf(&b, "# tilepipe replay results\n\n%d rounds x %d routes, %d samples of >= %g ms after %g ms warm-up, %d threads; ratio = route time / %s time per round (below 1 is faster), %s. %s%s. Channel = median span of an empty sample (no call), which each CPU batch sample includes once.%s\n\n",
		c.Rounds, len(doc.Routes), c.Samples, c.SampleMs, c.WarmupMs, c.Threads, c.Baseline, intervalNote(c.Interval, c.IntervalLevel()), clockNote(c.NovelRule), l2Note(doc), novelNote(doc.Summary))
	fmt.Fprintf(&b, "| case | route | status | median per op | min – max | channel | ratio vs %s [min – max] | %s interval | verdict |\n", c.Baseline, pct(c.IntervalLevel()))
	b.WriteString("|---|---|---|---:|---|---:|---|---|---|\n")
	machineOf := mixedMachines(doc)
	for _, s := range doc.Summary {
		if s.Status != artifacts.StatusPassed {
			fmt.Fprintf(&b, "| %s | %s | %s | - | - | - | - | - | %s |\n", s.Case, s.Route, s.Status, escape(s.Reason))
			continue
		}
		ratio, interval, verdict := "baseline", "", ""
		if s.RatioPairs > 0 {
			ratio = fmt.Sprintf("%.3f [%.3f – %.3f]", s.Ratio, s.RatioMin, s.RatioMax)
			interval, verdict = fmt.Sprintf("%.3f – %.3f", s.RatioLo, s.RatioHi), s.Verdict
			if verdict == stats.TooFew {
				interval = "-" // the range is in the ratio column; no interval covers
			}
			if s.RatioExcluded > 0 {
				verdict += fmt.Sprintf(" (%s left out: load)", plural(s.RatioExcluded, "round"))
			}
		} else if s.Route != c.Baseline {
			ratio = "-"
			if s.RatioExcluded > 0 {
				verdict = fmt.Sprintf("%s (%s left out: load)", stats.TooFew, plural(s.RatioExcluded, "round"))
			}
		}
		status := s.Status
		if s.BelowBest != "" {
			status += ", below best path"
		}
		if s.OwnGraphs != "" {
			status += ", own CUDA graphs"
		}
		if m, ok := machineOf[s.Case]; ok {
			status += ", on " + m
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s – %s | %s | %s | %s | %s |\n", s.Case, s.Route, status, Duration(s.MedianNs), Duration(s.MinNs), Duration(s.MaxNs), Duration(s.ChannelNs), ratio, interval, verdict)
	}
	b.WriteString(belowBest(doc.Summary))
	b.WriteString(ownGraphs(doc.Summary))
	b.WriteString(warm(doc.Summary))
	b.WriteString(bracket(doc))
	b.WriteString(stageCost(doc))
	b.WriteString(fixedCost(doc))
	b.WriteString(coldCosts(doc.Summary))
	b.WriteString(judged(doc))
	b.WriteString(shards(doc))
	b.WriteString(gpuCeilings(doc))
	b.WriteString(adaptiveRounds(doc))
	b.WriteString(machineLoad(doc.Visits, c.Load))
	var failedClosure []string
	for _, cc := range doc.Closure {
		if cc.Status != artifacts.StatusPassed {
			failedClosure = append(failedClosure, cc.Reason)
		}
	}
	if len(failedClosure) > 0 {
		fmt.Fprintf(&b, "\nBinary closure checks FAILED:\n\n- %s\n", strings.Join(failedClosure, "\n- "))
	} else {
		fmt.Fprintf(&b, "\nBinary closures re-hashed before and after each round: %d checks passed.\n", len(doc.Closure))
	}
	return b.String()
}

// shards says which shard of a plan a shard replay timed, or which shards
// a merged replay was made from, on which machines; "" for a replay of
// the whole plan on one machine.
func shards(doc artifacts.ReplayDoc) string {
	if sh := doc.Config.Shard; sh.Count > 0 {
		return fmt.Sprintf("\nShard %s of the plan: cases %s, every visit of each (merge the shards with tilepipe merge).\n", sh, strings.Join(doc.Cases, ", "))
	}
	if doc.Merge == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nMerged from %d shards, each a set of whole cases timed on one machine (every paired ratio is of one machine's visits):\n\n", len(doc.Merge.Shards))
	for _, r := range doc.Merge.Shards {
		fmt.Fprintf(&b, "- shard %s (%d cases, %s): %s\n", r.Shard, len(r.Cases), artifacts.Short(r.Manifest), r.Machine)
	}
	if len(doc.Merge.Mixed) > 0 {
		fmt.Fprintf(&b, "\nMIXED machines (merge --allow-mixed): rows of different machines do not compare with each other; each row says where it ran.\n\n- %s\n", strings.Join(doc.Merge.Mixed, "\n- "))
	}
	return b.String()
}

// mixedMachines is, in a merged replay of mixed machines, each case's
// machine (its host), for the row's status; nil otherwise.
func mixedMachines(doc artifacts.ReplayDoc) map[string]string {
	if doc.Merge == nil || len(doc.Merge.Mixed) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, r := range doc.Merge.Shards {
		host, _, _ := strings.Cut(r.Machine, ":")
		for _, c := range r.Cases {
			out[c] = "shard " + r.Shard.String() + " (" + host + ")"
		}
	}
	return out
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Duration formats nanoseconds for people.
func Duration(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "-"
	case ns >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	}
	return fmt.Sprintf("%.3g ns", ns)
}

// intervalNote says how the ratios' intervals were computed; a replay made
// before exact intervals, or before adaptive ones took 97.5%, renders as
// it did.
func intervalNote(method string, level float64) string {
	switch {
	case method != stats.IntervalSign:
		return "95% bootstrap interval of the median ratio"
	case level == artifacts.LevelAdaptive:
		return fmt.Sprintf("exact %s interval of the median ratio at every look of the stopping rule (order statistics of the per-round ratios by the sign test), so that where a case stopped its interval still covers the true ratio at least 95%% of the time (docs/statistics.md, \"Stopping and coverage\"); fewer than %d rounds give none: \"too few rounds\"", pct(level), stats.MinPairs(level))
	}
	return fmt.Sprintf("exact 95%% interval of the median ratio (order statistics of the per-round ratios by the sign test, at least 95%% coverage whatever the noise; fewer than %d rounds give none: \"too few rounds\")", stats.MinPairs(0.95))
}

// pct writes a level as a percentage: 95%, 97.5%.
func pct(level float64) string { return strconv.FormatFloat(level*100, 'f', -1, 64) + "%" }

// l2Note says the GPU visits' L2 policy (replay --l2) in the table's
// header; nothing for a replay that measured no GPU, or one made before
// the policy was recorded.
func l2Note(doc artifacts.ReplayDoc) string {
	gpu := false
	for _, s := range doc.Sessions {
		gpu = gpu || s.GPU != nil
	}
	if !gpu {
		return ""
	}
	switch doc.Config.L2 {
	case artifacts.L2Flush:
		return "; the GPU's L2 was flushed before every sample (twice its size written, after a novel sample's copy to the device and outside the span)"
	case artifacts.L2Warm:
		return "; the GPU's L2 was not flushed between samples (a novel sample's inputs, copied to the device just before, may sit in it)"
	}
	return ""
}

// gpuCeilings is the GPU's ceilings each session measured and, for every
// passed GPU row, its graph samples' median per call (config.graphBatch)
// and the fraction of its binding ceiling its median reached
// (internal/floors.Fraction); "" when no session measured a GPU and no
// row has graph samples.
func gpuCeilings(doc artifacts.ReplayDoc) string {
	var b strings.Builder
	var all [][]artifacts.CaseFloor
	for _, s := range doc.Sessions {
		all = append(all, s.Floors)
		g := s.GPU
		if g == nil {
			continue
		}
		fmt.Fprintf(&b, "\nGPU ceilings (session %d): %s copies %.2f TB/s (read+write, %d MiB)", s.Index, g.Device, g.CopyBandwidth/1e12, g.CopyBytes>>20)
		for i, r := range g.Gemm {
			kind := r.Dtype
			if r.Policy != "" {
				kind += " " + r.Policy
			}
			sep := ", "
			if i == 0 {
				sep = "; cuBLAS GemmEx "
			}
			fmt.Fprintf(&b, "%s%s %.0f TFLOP/s", sep, kind, r.Flops/1e12)
		}
		if g.GemmError != "" {
			fmt.Fprintf(&b, "; no cuBLAS rate: %s", g.GemmError)
		}
		b.WriteString(".\n")
	}
	graphs := slices.ContainsFunc(doc.Summary, func(s artifacts.Summary) bool { return s.GraphNs > 0 })
	if b.Len() == 0 && !graphs {
		return ""
	}
	fl := floors.Lowest(all)
	b.WriteString("\nFlagged samples: GPU telemetry (NVML, read before and after every sample) showed the clocks held down for power or heat, or another process on the GPU; they are kept in every statistic, and the audit names them.\n")
	if graphs {
		fmt.Fprintf(&b, "\nGraph samples: CUDA graphs of %d calls, replayed by %s.\n", doc.Config.GraphBatch, "adaptive_replay_span_v2")
	}
	b.WriteString("\n| case | route | median per op | graph per op | of ceiling | flagged samples |\n|---|---|---:|---:|---|---:|\n")
	for _, s := range doc.Summary {
		f, ok := fl[s.Case]
		if !(ok && f.Device == oracle.DeviceCUDA || s.GraphNs > 0) || s.Status != artifacts.StatusPassed {
			continue
		}
		graph := "-"
		if s.GraphNs > 0 {
			graph = Duration(s.GraphNs)
		} else if s.OwnGraphs != "" {
			graph = "its own: " + Duration(s.MedianNs)
		}
		if !ok {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | - | %d |\n", s.Case, s.Route, Duration(s.MedianNs), graph, s.Flagged)
			continue
		}
		frac, what := floors.Fraction(f, s.MedianNs)
		ceiling := fmt.Sprintf("%.2f TB/s", f.Bandwidth/1e12)
		if what == "compute" {
			ceiling = fmt.Sprintf("%.0f TFLOP/s", f.PeakFlops/1e12)
		}
		pct := fmt.Sprintf("%.0f%%", 100*frac)
		if frac < 0.1 {
			pct = fmt.Sprintf("%.2g%%", 100*frac)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s of %s (%s) | %d |\n", s.Case, s.Route, Duration(s.MedianNs), graph, pct, what, ceiling, s.Flagged)
	}
	return b.String()
}

// machineLoad is the other load the visits overlapped (artifacts.VisitLoad):
// its median and most, in cores, and every visit above the threshold with
// what the load rule (config.load) did with it; "" for a replay that did
// not measure it.
func machineLoad(visits []artifacts.VisitResult, rule string) string {
	var cores []float64
	var most artifacts.VisitResult
	mostCores := -1.0
	var loaded []string
	for _, v := range visits {
		if v.Load == nil || v.WallNs <= 0 {
			continue
		}
		c := float64(v.Load.OtherNs+v.Load.StealNs) / float64(v.WallNs)
		cores = append(cores, c)
		if c > mostCores {
			most, mostCores = v, c
		}
		if v.Load.Loaded {
			loaded = append(loaded, fmt.Sprintf("visit %d (%s %s, round %d) %.2f", v.Index, v.Case, v.Route, v.Round+1, c))
		}
	}
	if len(cores) == 0 {
		return ""
	}
	s := fmt.Sprintf("\nOther load during the visits (CPU time of processes neither the visit's nor replay's, and steal, in cores over each visit): median %.2f, most %.2f (visit %d, %s %s). ",
		stats.Median(cores), mostCores, most.Index, most.Case, most.Route)
	if len(loaded) == 0 {
		return s + fmt.Sprintf("No visit overlapped more than %.2f cores.\n", load.MaxOtherCores)
	}
	n := len(loaded)
	if n > 10 {
		loaded = append(loaded[:10], fmt.Sprintf("and %d more", n-10))
	}
	what := "flagged; still in every statistic" // replays made before the load rule
	switch rule {
	case artifacts.LoadExclude:
		what = "flagged; their rounds are left out of the paired ratios, not of the medians"
	case artifacts.LoadAllow:
		what = "flagged; kept in every statistic, as --allow-load asked"
	}
	return s + fmt.Sprintf("%d of %d visits overlapped more than %.2f cores (%s): %s.\n", n, len(cores), load.MaxOtherCores, what, strings.Join(loaded, "; "))
}

// adaptiveRounds says what an adaptive replay's stopping rule did
// (config.target): the rule, how many ratio rows reached the target, the
// rows short of it, and where each case stopped; "" for a replay of
// fixed rounds.
func adaptiveRounds(doc artifacts.ReplayDoc) string {
	c := doc.Config
	if c.Target <= 0 {
		return ""
	}
	var b strings.Builder
	replayBudget := ""
	if c.TotalBudgetS > 0 {
		replayBudget = fmt.Sprintf(", what was left of the replay's %s of visits could not pay for its next block", time.Duration(c.TotalBudgetS*1e9))
	}
	fmt.Fprintf(&b, "\nAdaptive rounds: after %d rounds, a case got blocks of %d more until every paired ratio's exact %s interval was within ±%.3g%% of its median, a row had spent %g s of visits%s, or it had %d rounds.",
		c.Rounds, adaptive.Block(len(doc.Routes)), pct(c.IntervalLevel()), c.Target*100, c.BudgetS, replayBudget, c.MaxRounds)
	ratios, reached := 0, 0
	var short []string
	for _, s := range doc.Summary {
		if s.RatioPairs == 0 && s.Verdict == "" {
			continue
		}
		ratios++
		if s.Precision > 0 && s.Precision <= c.Target {
			reached++
		} else if p := s.Precision; p > 0 {
			short = append(short, fmt.Sprintf("%s %s ±%.2g%%", s.Case, s.Route, p*100))
		} else {
			short = append(short, fmt.Sprintf("%s %s (no interval)", s.Case, s.Route))
		}
	}
	fmt.Fprintf(&b, " %d of %d ratio rows reached the target", reached, ratios)
	if n := len(short); n > 0 {
		if n > 10 {
			short = append(short[:10], fmt.Sprintf("and %d more", n-10))
		}
		fmt.Fprintf(&b, "; short of it: %s", strings.Join(short, "; "))
	}
	b.WriteString(". Cases stopped:")
	for i, st := range doc.Stops {
		sep := ";"
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %s after %d rounds (%s)", sep, st.Case, st.Rounds, st.Stop)
	}
	b.WriteString(".\n")
	return b.String()
}

// plural is "1 round", "2 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// belowBest lists the rows whose route says their code is not the best
// path this machine supports, grouped by route and reason.
func belowBest(rows []artifacts.Summary) string {
	return notes(rows, func(s artifacts.Summary) string { return s.BelowBest },
		"Below their best path (the route says the code it built does not run the fastest path this machine supports; its times are of that code)")
}

// ownGraphs lists the rows whose every call replays CUDA graphs of the
// route's own, grouped by route and reason: their figures are graph
// figures, to be set beside the other rows' graph per op.
func ownGraphs(rows []artifacts.Summary) string {
	return notes(rows, func(s artifacts.Summary) string { return s.OwnGraphs },
		"Own CUDA graphs (every call the route makes replays CUDA graphs of its own, so the row's novel and warm figures are graph figures, each call with the route's own dispatch before its replay: set them beside other rows' graph per op, the GPU table's column under --graph-batch, as well as their stream samples; replay takes no graph samples of them)")
}

// notes lists the rows whose note (pick) is not empty under heading,
// grouped by route and note.
func notes(rows []artifacts.Summary, pick func(artifacts.Summary) string, heading string) string {
	type key struct{ route, why string }
	cases := map[key][]string{}
	var order []key
	for _, s := range rows {
		if pick(s) == "" {
			continue
		}
		k := key{s.Route, pick(s)}
		if cases[k] == nil {
			order = append(order, k)
		}
		cases[k] = append(cases[k], s.Case)
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + heading + ":\n\n")
	for _, k := range order {
		fmt.Fprintf(&b, "- %s (%s): %s\n", k.route, strings.Join(cases[k], ", "), k.why)
	}
	return b.String()
}
