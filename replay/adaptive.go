package replay

import (
	"maps"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/adaptive"
)

// adaptiveRounds applies the stopping rule (internal/adaptive) as an
// adaptive replay goes: which cases each round after the fixed ones
// visits, and where and why each case stopped.
type adaptiveRounds struct {
	r             *replayer
	cases, routes []string
	isOpen        map[string]bool
	stops         []artifacts.CaseStop
	rows          map[int][]samples.Row // a done visit's samples, read once
}

func (r *replayer) newAdaptive(cases, routes []string) *adaptiveRounds {
	a := &adaptiveRounds{r: r, cases: cases, routes: routes, isOpen: map[string]bool{}, rows: map[int][]samples.Row{}}
	for _, c := range cases {
		a.isOpen[c] = true
	}
	return a
}

// timeable: the pairs the plan visits.
func (a *adaptiveRounds) timeable(c, rt string) bool {
	e := a.r.entries[artifacts.Pair{Case: c, Route: rt}]
	return e != nil && e.Status == artifacts.StatusPrepared
}

// open is the set of cases round visits: at a boundary the rule decides
// every open case from the visits before round (adaptive.Share); between
// boundaries the set stands.
func (a *adaptiveRounds) open(round int, done map[int]*artifacts.VisitResult) (map[string]bool, error) {
	cfg := a.r.cfg.ReplayConfig
	block := adaptive.Block(len(a.routes))
	if adaptive.Boundary(round, cfg.Rounds, block) {
		var open []adaptive.Case
		budget := adaptive.Budget{TotalNs: int64(cfg.TotalBudgetS * 1e9)}
		var before []artifacts.VisitResult
		for _, i := range slices.Sorted(maps.Keys(done)) {
			if v := done[i]; v.Round < round {
				before = append(before, *v)
			}
		}
		budget.SpentNs, budget.MeanNs = adaptive.Spent(before)
		for _, c := range a.cases {
			if !a.isOpen[c] {
				continue
			}
			var visits []artifacts.VisitResult
			var rows []samples.Row
			spent := map[string]int64{}
			for _, v := range before {
				if v.Case != c {
					continue
				}
				visits = append(visits, v)
				spent[v.Route] += v.WallNs
				if v.Status != artifacts.StatusPassed {
					continue
				}
				if a.rows[v.Index] == nil {
					rs, err := a.r.readSamples(v.Samples)
					if err != nil {
						return nil, err
					}
					a.rows[v.Index] = rs
				}
				rows = append(rows, a.rows[v.Index]...)
			}
			sums := Summaries([]string{c}, a.routes, a.r.pdoc.Entries, visits, rows, cfg, nil)
			var routes []string
			for _, rt := range a.routes {
				if a.timeable(c, rt) {
					routes = append(routes, rt)
				}
			}
			open = append(open, adaptive.Case{ID: c, Rows: adaptive.Rows(sums, cfg.Baseline, spent), Routes: routes})
		}
		stops := adaptive.Share(open, cfg.Target, int64(cfg.BudgetS*1e9), block, budget)
		for _, c := range open {
			if stop, ok := stops[c.ID]; ok {
				a.isOpen[c.ID] = false
				a.stops = append(a.stops, artifacts.CaseStop{Case: c.ID, Rounds: round, Stop: stop})
			}
		}
	}
	open := map[string]bool{}
	for c, o := range a.isOpen {
		if o {
			open[c] = true
		}
	}
	return open, nil
}

// finish records the cases still open after the most rounds.
func (a *adaptiveRounds) finish(rounds int) {
	for _, c := range a.cases {
		if a.isOpen[c] {
			a.stops = append(a.stops, artifacts.CaseStop{Case: c, Rounds: rounds, Stop: adaptive.StopRounds})
		}
	}
}
