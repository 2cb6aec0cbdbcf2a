// Package plan is a replay's plan: the balanced route orders, the visits
// of each round, and the default rounds. Replay follows it and the audit
// regenerates it, so it lives outside both stages.
package plan

import (
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/stats"
)

// Orders is the balanced set of route orders for n routes: every
// permutation for n <= 3, else a Williams square (n rows for even n, 2n for
// odd n), in which each route takes each position equally often and
// immediately precedes every other route equally often.
func Orders(n int) [][]int {
	if n <= 3 {
		return permutations(n)
	}
	return williams(n)
}

func permutations(n int) [][]int {
	var out [][]int
	var rec func(prefix []int, used []bool)
	rec = func(prefix []int, used []bool) {
		if len(prefix) == n {
			out = append(out, append([]int(nil), prefix...))
			return
		}
		for i := 0; i < n; i++ {
			if !used[i] {
				used[i] = true
				rec(append(prefix, i), used)
				used[i] = false
			}
		}
	}
	rec(nil, make([]bool, n))
	return out
}

// williams builds the standard Williams design: first row 0, 1, n-1, 2,
// n-2, ...; row r adds r mod n. For odd n the mirrored rows are appended.
func williams(n int) [][]int {
	first := make([]int, n)
	lo, hi := 1, n-1
	for j := 1; j < n; j++ {
		if j%2 == 1 {
			first[j] = lo
			lo++
		} else {
			first[j] = hi
			hi--
		}
	}
	var rows [][]int
	for r := 0; r < n; r++ {
		row := make([]int, n)
		for j := range row {
			row[j] = (first[j] + r) % n
		}
		rows = append(rows, row)
	}
	if n%2 == 1 {
		for r := 0; r < n; r++ {
			row := make([]int, n)
			for j := range row {
				row[j] = rows[r][n-1-j]
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// DefaultRounds is the fewest rounds that give every paired ratio an
// exact 95% interval (stats.MinPairs: 6) and use every balanced order
// equally often: the smallest multiple of the orders' count that is at
// least 6 (6 for 1 to 3 routes).
func DefaultRounds(routes int) int {
	n := len(Orders(routes))
	return (stats.MinPairs(0.95) + n - 1) / n * n
}

// Plan lists every visit: in round r, cases in the cohort order rotated by
// r, and within each case the routes in order Orders[r mod len]. Only
// timeable (case, route) pairs get visits.
func Plan(cases, routes []string, rounds int, timeable func(c, r string) bool) []artifacts.Visit {
	var plan []artifacts.Visit
	for r := 0; r < rounds; r++ {
		plan = RoundVisits(plan, cases, routes, r, func(string) bool { return true }, timeable)
	}
	return plan
}

// RoundVisits appends to plan the visits of round r (as [Plan] orders
// them) of the cases open in it, numbered on from plan's length: an
// adaptive replay's rounds after its fixed ones visit only the cases the
// stopping rule left open (internal/adaptive).
func RoundVisits(plan []artifacts.Visit, cases, routes []string, r int, open func(c string) bool, timeable func(c, r string) bool) []artifacts.Visit {
	orders := Orders(len(routes))
	order := orders[r%len(orders)]
	for i := range cases {
		c := cases[(i+r)%len(cases)]
		if !open(c) {
			continue
		}
		for pos, ri := range order {
			if !timeable(c, routes[ri]) {
				continue
			}
			plan = append(plan, artifacts.Visit{Index: len(plan), Round: r, Position: pos, Case: c, Route: routes[ri]})
		}
	}
	return plan
}
