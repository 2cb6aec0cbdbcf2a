package plan

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// balance counts how often each route takes each position and how often
// each ordered pair is adjacent, over rows.
func balance(rows [][]int, n int) (pos [][]int, prec [][]int) {
	pos = make([][]int, n)
	prec = make([][]int, n)
	for i := range pos {
		pos[i] = make([]int, n)
		prec[i] = make([]int, n)
	}
	for _, row := range rows {
		for j, r := range row {
			pos[r][j]++
			if j > 0 {
				prec[row[j-1]][r]++
			}
		}
	}
	return pos, prec
}

func TestOrdersBalanced(t *testing.T) {
	for n := 1; n <= 8; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rows := Orders(n)
			pos, prec := balance(rows, n)
			for r := 0; r < n; r++ {
				for j := 0; j < n; j++ {
					if pos[r][j] != pos[0][0] {
						t.Fatalf("Orders(%d): route %d at position %d %d times, want %d", n, r, j, pos[r][j], pos[0][0])
					}
					if r != j && prec[r][j] != prec[0][min(1, n-1)] {
						t.Fatalf("Orders(%d): %d before %d %d times, want %d", n, r, j, prec[r][j], prec[0][1])
					}
				}
			}
		})
	}
}

func TestPlanRotatesCases(t *testing.T) {
	plan := Plan([]string{"a", "b", "c"}, []string{"x", "y"}, 4, func(c, r string) bool { return !(c == "b" && r == "y") })
	var firsts []string
	for _, v := range plan {
		if v.Index == 0 || plan[v.Index-1].Round != v.Round {
			firsts = append(firsts, v.Case)
		}
	}
	if got, want := fmt.Sprint(firsts), "[a b c a]"; got != want {
		t.Errorf("Plan first case per round = %s, want %s", got, want)
	}
	for _, v := range plan {
		if v.Case == "b" && v.Route == "y" {
			t.Errorf("Plan visited untimeable pair %+v", v)
		}
	}
	if got, want := len(plan), 4*5; got != want {
		t.Errorf("len(Plan) = %d, want %d", got, want)
	}
}

// TestDefaultRoundsExact: the default gives every ratio an exact 95%
// interval (6 rounds at least) and uses every balanced order equally.
func TestDefaultRoundsExact(t *testing.T) {
	for routes, want := range map[int]int{1: 6, 2: 6, 3: 6, 4: 8, 5: 10, 6: 6} {
		got := DefaultRounds(routes)
		if got != want || got%len(Orders(routes)) != 0 {
			t.Errorf("DefaultRounds(%d) = %d, want %d (a multiple of %d orders, at least 6)", routes, got, want, len(Orders(routes)))
		}
	}
}

// TestRoundVisits: a round of an adaptive replay visits the open cases
// only, in the order Plan gives them, numbered on from the plan so far.
func TestRoundVisits(t *testing.T) {
	all := func(string, string) bool { return true }
	full := Plan([]string{"a", "b", "c"}, []string{"x", "y"}, 3, all)
	plan := Plan([]string{"a", "b", "c"}, []string{"x", "y"}, 2, all)
	plan = RoundVisits(plan, []string{"a", "b", "c"}, []string{"x", "y"}, 2, func(c string) bool { return c != "b" }, all)
	var want []artifacts.Visit
	for _, v := range full {
		if v.Round < 2 || v.Case != "b" {
			v.Index = len(want)
			want = append(want, v)
		}
	}
	if !slices.Equal(plan, want) {
		t.Errorf("RoundVisits = %+v\nwant %+v", plan[12:], want[12:])
	}
}
