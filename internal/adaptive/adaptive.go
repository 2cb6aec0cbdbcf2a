// Package adaptive is the stopping rule of adaptive replays
// (docs/statistics.md, "Rounds to a precision target"): after the fixed
// rounds, a case gets another block of rounds (one of each balanced route
// order) while one of its paired ratios' exact intervals (97.5% at each
// look, artifacts.LevelAdaptive) is wider than the target and none of its
// rows has spent its time budget. Replay
// applies the rule as it goes; the audit applies it again to the
// recorded samples, each from its own summaries, and both call Decide, so
// there is one rule.
package adaptive

import (
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
