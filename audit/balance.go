package audit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/shard"
)

// balanceCheck checks that every planned visit happened once and that the route
// orders are balanced: each route equally often at each position and
// immediately before each other route equally often.
func balanceCheck(cp *checkpoint, f *facts) finding {
	d := cp.rdoc
	p, rounds := planCovers(cp)
	op, w := orderBalance(d, rounds)
	return finding{problems: append(p, op...), warnings: w, summary: fmt.Sprintf("%d visits in %d rounds; positions and immediate precedence of %d routes counted", len(d.Visits), rounds, len(d.Routes))}
}

// planCovers checks that every planned visit happened once, in order, and
// that every prepared pair of the replay's cases is planned once in every
// round of its case; it returns the problems and the rounds planned.
func planCovers(cp *checkpoint) (p []string, rounds int) {
	d := cp.rdoc
	if len(d.Visits) != len(d.Plan) {
		p = append(p, fmt.Sprintf("%d visits recorded, %d planned", len(d.Visits), len(d.Plan)))
	}
	for i, v := range d.Visits {
		if i >= len(d.Plan) || v.Visit != d.Plan[i] {
			p = append(p, fmt.Sprintf("visit %d does not match plan entry %d", v.Index, i))
			break
		}
	}
	// Every prepared pair is planned in every round of its case: every
	// round, or in an adaptive replay every round before its case stopped.
	// A shard plans its own cases (internal/shard), a replay every case.
	var all []string
	for _, c := range cp.cdoc.Cases {
		all = append(all, c.Case.ID)
	}
	cases := shard.Cases(all, d.Config.Shard)
	if !slices.Equal(d.Cases, cases) {
		what := "the capture's cases"
		if d.Config.Shard.Count > 0 {
			what = fmt.Sprintf("shard %s of the capture's cases", d.Config.Shard)
		}
		p = append(p, fmt.Sprintf("cases %v, but %s are %v", d.Cases, what, cases))
	}
	prepared := map[artifacts.Pair]bool{}
	for _, e := range cp.pdoc.Entries {
		if e.Status == artifacts.StatusPrepared && slices.Contains(cases, e.Case) {
			prepared[e.Pair()] = true
		}
	}
	perPair := map[artifacts.Pair]int{}
	rounds = d.Config.Rounds
	for _, v := range d.Plan {
		perPair[v.Pair()]++
		rounds = max(rounds, v.Round+1)
	}
	roundsOf := map[string]int{}
	for _, s := range d.Stops {
		roundsOf[s.Case] = s.Rounds
	}
	for _, k := range slices.SortedFunc(maps.Keys(prepared), func(a, b artifacts.Pair) int { return strings.Compare(a.String(), b.String()) }) {
		want := d.Config.Rounds
		if d.Config.Target > 0 && roundsOf[k.Case] > 0 {
			want = roundsOf[k.Case]
		}
		if perPair[k] != want {
			p = append(p, fmt.Sprintf("%s/%s planned %d times, want one visit per round (%d)", k.Case, k.Route, perPair[k], want))
		}
	}
	if d.Config.Target > 0 && len(d.Stops) > 0 {
		want := cp.adaptivePlan()
		if len(want) != len(d.Plan) {
			p = append(p, fmt.Sprintf("plan: %d visits, the stops give %d", len(d.Plan), len(want)))
		}
		for i := range min(len(want), len(d.Plan)) {
			if want[i] != d.Plan[i] {
				p = append(p, fmt.Sprintf("plan entry %d %+v, the stops give %+v", i, d.Plan[i], want[i]))
				break
			}
		}
	}
	return p, rounds
}

// orderBalance reconstructs each round's route order from the positions
// and counts, over the routes each round visited, every route's positions
// and every ordered pair's immediate precedence: a position or a pair
// counted unevenly is a warning (a screen, not a balanced comparison).
func orderBalance(d artifacts.ReplayDoc, rounds int) (p, w []string) {
	n := len(d.Routes)
	// Each round has one route order; reconstruct it from positions.
	order := map[int][]string{}
	for _, v := range d.Plan {
		o := order[v.Round]
		if o == nil {
			o = make([]string, n)
			order[v.Round] = o
		}
		if v.Position < 0 || v.Position >= n {
			p = append(p, fmt.Sprintf("visit %d: position %d outside 0..%d", v.Index, v.Position, n-1))
			continue
		}
		if o[v.Position] != "" && o[v.Position] != v.Route {
			p = append(p, fmt.Sprintf("round %d: position %d holds %s and %s", v.Round+1, v.Position, o[v.Position], v.Route))
		}
		o[v.Position] = v.Route
	}
	// Balance is counted over the routes each round actually visited, in
	// their relative order (a route with no timeable case leaves a gap).
	pos := map[string][]int{}
	prec := map[precedence]int{}
	present := 0
	for rd := 0; rd < rounds; rd++ {
		var o []string
		for _, rt := range order[rd] {
			if rt != "" {
				o = append(o, rt)
			}
		}
		present = max(present, len(o))
		for j, rt := range o {
			if pos[rt] == nil {
				pos[rt] = make([]int, n)
			}
			pos[rt][j]++
			if j > 0 {
				prec[precedence{o[j-1], rt}]++
			}
		}
	}
	for rt := range pos {
		pos[rt] = pos[rt][:present]
	}
	// Routes in name order, so the counts compared with the first are the
	// same on every audit of one checkpoint.
	names := sortedKeys(pos)
	var ref int = -1
	for _, rt := range names {
		for j, c := range pos[rt] {
			if ref < 0 {
				ref = c
			}
			if c != ref {
				w = append(w, fmt.Sprintf("route %s at position %d in %d rounds, others %d: positions are not balanced", rt, j, c, ref))
			}
		}
	}
	ref = -1
	for _, x := range names {
		for _, y := range names {
			if x == y {
				continue
			}
			c := prec[precedence{x, y}]
			if ref < 0 {
				ref = c
			}
			if c != ref {
				w = append(w, fmt.Sprintf("%s immediately before %s in %d rounds, other pairs %d: carry-over is not balanced", x, y, c, ref))
			}
		}
	}
	if len(w) > 0 {
		w = append([]string{fmt.Sprintf("%d rounds over %d routes is a screen, not a balanced comparison", rounds, n)}, w...)
	}
	return p, w
}

// precedence is one route visited immediately before another in a round.
type precedence struct{ before, after string }
