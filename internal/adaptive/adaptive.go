// Package adaptive is the stopping rule of adaptive replays
// (docs/statistics.md, "Rounds to a precision target"): after the fixed
// rounds, a case gets another block of rounds (one of each balanced route
// order) while one of its paired ratios' exact intervals (97.5% at each
// look, artifacts.LevelAdaptive) is wider than the target, none of its
// rows has spent its time budget and, with a budget for the whole replay,
// what is left of it pays for the block. Replay applies the rule as it
// goes; the audit applies it again to the recorded samples, each from its
// own summaries, and both call [Share], so there is one rule.
package adaptive

import (
	"cmp"
	"math"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/plan"
	"github.com/tilepipe/tilepipe/stats"
)

// Reasons a case stopped (artifacts.CaseStop.Stop).
const (
	// StopTarget: every paired ratio of the case has an exact interval
	// within ±target of its median.
	StopTarget = "target reached"
	// StopBudget: a row of the case spent its budget of visit time.
	StopBudget = "budget spent"
	// StopNoRatio: the case has no paired ratio to narrow (only the
	// baseline, or a failed row on either side).
	StopNoRatio = "no ratio"
	// StopRounds: the case ran the most rounds the replay allows.
	StopRounds = "most rounds"
	// StopReplayBudget: what is left of the replay's budget of visit time
	// (config.totalBudgetS) does not pay for the case's next block.
	StopReplayBudget = "replay budget spent"
)

// Row is what the rule knows of one (case, route) row at a decision,
// from the rounds before it.
type Row struct {
	Route string
	// Ratio: the row has a paired ratio against the baseline (it is not
	// the baseline, and both rows passed every visit so far).
	Ratio bool
	// Median, Lo, Hi: the paired ratio's median and exact interval; Exact
	// is false when the rounds are too few for one.
	Median, Lo, Hi float64
	Exact          bool
	// SpentNs is the wall time of the row's visits so far.
	SpentNs int64
}

// Reached says whether an exact interval [lo, hi] lies within ±target
// (relative) of its median.
func Reached(median, lo, hi float64, exact bool, target float64) bool {
	return exact && median > 0 && lo >= median*(1-target) && hi <= median*(1+target)
}

// Precision is the interval's larger half-width relative to its median
// (0 without an exact interval).
func Precision(median, lo, hi float64, exact bool) float64 {
	if !exact || median <= 0 {
		return 0
	}
	return max(hi-median, median-lo) / median
}

// Boundary says whether a decision is taken before round r (0-based):
// after the fixed rounds and after every block of rounds that follows.
func Boundary(r, rounds, block int) bool {
	return r >= rounds && block > 0 && (r-rounds)%block == 0
}

// Decide is the rule at a boundary: "" to give the case another block, or
// why it stops.
func Decide(rows []Row, target float64, budgetNs int64) string {
	ratios, reached := 0, 0
	for _, r := range rows {
		if r.Ratio {
			ratios++
			if Reached(r.Median, r.Lo, r.Hi, r.Exact, target) {
				reached++
			}
		}
	}
	switch {
	case ratios == 0:
		return StopNoRatio
	case reached == ratios:
		return StopTarget
	}
	for _, r := range rows {
		if r.SpentNs >= budgetNs {
			return StopBudget
		}
	}
	return ""
}

// Case is a case still open at a boundary: its rows, and the routes a
// round visits for it.
type Case struct {
	ID     string
	Rows   []Row
	Routes []string
}

// Budget is the replay's budget of visit time at a boundary: the whole
// budget (0: none), what every visit before the boundary spent, and each
// route's mean visit time so far, which prices a block.
type Budget struct {
	TotalNs, SpentNs int64
	MeanNs           map[string]float64
}

// Spent is what the visits before a boundary spent, all together, and
// each route's mean visit time: the replay budget's state ([Budget]).
// Every visit counts, failed ones too: they took the time.
func Spent(before []artifacts.VisitResult) (spentNs int64, meanNs map[string]float64) {
	sum, n := map[string]int64{}, map[string]int{}
	for _, v := range before {
		spentNs += v.WallNs
		sum[v.Route] += v.WallNs
		n[v.Route]++
	}
	meanNs = map[string]float64{}
	for rt, s := range sum {
		meanNs[rt] = float64(s) / float64(n[rt])
	}
	return spentNs, meanNs
}

// Share is the rule at a boundary for every case still open, in the
// replay's case order: first each case alone ([Decide]); then, with a
// replay budget, the cases that would go on share what is left of it. A
// case's next block costs block rounds of each of its routes at that
// route's mean visit time; the cases go on in order of need (those
// without an exact interval yet first, then the closest to the target,
// then the replay's order) while what is left pays for them, and the
// others stop (StopReplayBudget). Prices come from every visit of the
// route, not the case's own, so a case's own timings barely move its
// fate. It returns the stops by case.
func Share(cases []Case, target float64, rowBudgetNs int64, block int, b Budget) map[string]string {
	stops := map[string]string{}
	var going []Case
	for _, c := range cases {
		if stop := Decide(c.Rows, target, rowBudgetNs); stop != "" {
			stops[c.ID] = stop
		} else {
			going = append(going, c)
		}
	}
	if b.TotalNs <= 0 {
		return stops
	}
	need := func(c Case) float64 { // +Inf: no exact interval yet
		worst := 0.0
		for _, r := range c.Rows {
			if !r.Ratio {
				continue
			}
			if !r.Exact || r.Median <= 0 {
				return math.Inf(1)
			}
			worst = max(worst, Precision(r.Median, r.Lo, r.Hi, r.Exact))
		}
		return worst
	}
	// Without an interval (+Inf) first, in the replay's order (the sort
	// is stable); then the closest to the target.
	order := slices.Clone(going)
	slices.SortStableFunc(order, func(x, y Case) int {
		nx, ny := need(x), need(y)
		if math.IsInf(nx, 1) || math.IsInf(ny, 1) {
			return cmp.Compare(bool2int(!math.IsInf(nx, 1)), bool2int(!math.IsInf(ny, 1)))
		}
		return cmp.Compare(nx, ny)
	})
	left := float64(b.TotalNs - b.SpentNs)
	for _, c := range order {
		cost := 0.0
		for _, rt := range c.Routes {
			cost += float64(block) * b.MeanNs[rt]
		}
		if cost <= left {
			left -= cost
			continue
		}
		stops[c.ID] = StopReplayBudget
	}
	return stops
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Rows turns a case's summaries of the rounds before a decision into the
// rule's rows: a row has a ratio when it and the baseline passed, and
// spent is each route's visit time so far.
func Rows(sums []artifacts.Summary, baseline string, spent map[string]int64) []Row {
	basePassed := false
	for _, s := range sums {
		if s.Route == baseline && s.Status == artifacts.StatusPassed {
			basePassed = true
		}
	}
	var rows []Row
	for _, s := range sums {
		rows = append(rows, Row{
			Route:   s.Route,
			Ratio:   s.Route != baseline && basePassed && s.Status == artifacts.StatusPassed,
			Median:  s.Ratio,
			Lo:      s.RatioLo,
			Hi:      s.RatioHi,
			Exact:   s.Verdict != "" && s.Verdict != stats.TooFew,
			SpentNs: spent[s.Route],
		})
	}
	return rows
}

// Block is the rounds of one block for n routes: one round of each of
// the plan's balanced orders, so every block keeps positions and
// carry-over balanced.
func Block(n int) int { return len(plan.Orders(n)) }
