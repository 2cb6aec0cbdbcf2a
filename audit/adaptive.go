package audit

import (
	"fmt"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/adaptive"
	"github.com/tilepipe/tilepipe/internal/plan"
)

// stoppingCheck re-derives an adaptive replay's stops (config.target,
// docs/statistics.md "Rounds to a precision target"): at every boundary
// it recomputes, from the recorded samples of the rounds before it and
// with the audit's own summaries, each open case's paired ratios and the
// visit time each row spent, applies the rule (internal/adaptive), and
// compares the stops with the document's. The plan must be the one those
// stops give (balance checks it). A replay of fixed rounds records none.
func stoppingCheck(cp *checkpoint, f *facts) finding {
	d := cp.rdoc
	c := d.Config
	if c.Target <= 0 {
		var p []string
		if len(d.Stops) > 0 {
			p = append(p, fmt.Sprintf("config.target is 0 (fixed rounds), yet the document records %d stops", len(d.Stops)))
		}
		return finding{problems: p, summary: fmt.Sprintf("fixed rounds: every case %d", c.Rounds)}
	}
	if slices.ContainsFunc(d.Closure, func(cc artifacts.ClosureCheck) bool { return cc.Status != artifacts.StatusPassed }) {
		return finding{warnings: []string{"a closure check failed, which ended the replay early: its stops are not re-derived"}, summary: "adaptive rounds ended by a failed closure check"}
	}
	want := cp.stops(f)
	var p []string
	if !slices.Equal(want, d.Stops) {
		p = append(p, fmt.Sprintf("stops %v, the rule gives %v from the recorded samples", d.Stops, want))
	}
	reached, ratios := 0, 0
	for _, s := range d.Summary {
		if s.Verdict == "" {
			continue
		}
		ratios++
		if s.Precision > 0 && s.Precision <= c.Target {
			reached++
		}
	}
	return finding{problems: p, summary: fmt.Sprintf("re-derived where %d cases stopped (target ±%.3g%%, budget %g s a row%s, at most %d rounds); %d of %d ratio rows reached the target", len(want), c.Target*100, c.BudgetS, replayBudget(c), c.MaxRounds, reached, ratios)}
}

// replayBudget is ", N s for the replay" where it has a budget.
func replayBudget(c artifacts.ReplayConfig) string {
	if c.TotalBudgetS <= 0 {
		return ""
	}
	return fmt.Sprintf(", %g s for the replay", c.TotalBudgetS)
}

// stops applies the stopping rule to the recorded visits and samples.
func (cp *checkpoint) stops(f *facts) []artifacts.CaseStop {
	d := cp.rdoc
	c := d.Config
	visits, vrows, _ := f.passedRows()
	rowsOf := map[int][]samples.Row{}
	for i, v := range visits {
		rowsOf[v.Index] = vrows[i]
	}
	open := map[string]bool{}
	for _, cs := range d.Cases {
		open[cs] = true
	}
	var stops []artifacts.CaseStop
	block := adaptive.Block(len(d.Routes))
	for r := c.Rounds; r < c.PlannedRounds(); r++ {
		if !adaptive.Boundary(r, c.Rounds, block) {
			continue
		}
		var all []artifacts.VisitResult
		for _, v := range d.Visits {
			if v.Round < r {
				all = append(all, v)
			}
		}
		budget := adaptive.Budget{TotalNs: int64(c.TotalBudgetS * 1e9)}
		budget.SpentNs, budget.MeanNs = adaptive.Spent(all)
		var cases []adaptive.Case
		for _, cs := range d.Cases {
			if !open[cs] {
				continue
			}
			before := d
			before.Visits = nil
			var rows []samples.Row
			spent := map[string]int64{}
			for _, v := range all {
				if v.Case != cs {
					continue
				}
				before.Visits = append(before.Visits, v)
				spent[v.Route] += v.WallNs
				rows = append(rows, rowsOf[v.Index]...)
			}
			got := recompute(before, rows, cp.device, nil) // replay decided without floors
			var sums []artifacts.Summary
			var routes []string
			for _, rt := range d.Routes {
				if !cp.timeable(cs, rt) {
					continue
				}
				routes = append(routes, rt)
				s, ok := got[artifacts.Pair{Case: cs, Route: rt}]
				if !ok {
					s = artifacts.Summary{Case: cs, Route: rt, Status: artifacts.StatusFailed}
				} else {
					s.Status = artifacts.StatusPassed
				}
				sums = append(sums, s)
			}
			cases = append(cases, adaptive.Case{ID: cs, Rows: adaptive.Rows(sums, c.Baseline, spent), Routes: routes})
		}
		decided := adaptive.Share(cases, c.Target, int64(c.BudgetS*1e9), block, budget)
		for _, cs := range cases {
			if stop, ok := decided[cs.ID]; ok {
				open[cs.ID] = false
				stops = append(stops, artifacts.CaseStop{Case: cs.ID, Rounds: r, Stop: stop})
			}
		}
		if !slices.ContainsFunc(d.Cases, func(cs string) bool { return open[cs] }) {
			return stops
		}
	}
	for _, cs := range d.Cases {
		if open[cs] {
			stops = append(stops, artifacts.CaseStop{Case: cs, Rounds: c.PlannedRounds(), Stop: adaptive.StopRounds})
		}
	}
	return stops
}

// timeable: the pairs the plan visits (prepared entries).
func (cp *checkpoint) timeable(c, rt string) bool {
	e := cp.entry(c, rt)
	return e != nil && e.Status == artifacts.StatusPrepared
}

// adaptivePlan is the plan an adaptive replay's stops give: the fixed
// rounds, then each case in every round before its stop.
func (cp *checkpoint) adaptivePlan() []artifacts.Visit {
	d := cp.rdoc
	roundsOf := map[string]int{}
	last := d.Config.Rounds
	for _, s := range d.Stops {
		roundsOf[s.Case] = s.Rounds
		last = max(last, s.Rounds)
	}
	visits := plan.Plan(d.Cases, d.Routes, d.Config.Rounds, cp.timeable)
	for r := d.Config.Rounds; r < last; r++ {
		visits = plan.RoundVisits(visits, d.Cases, d.Routes, r, func(c string) bool { return roundsOf[c] > r }, cp.timeable)
	}
	return visits
}
