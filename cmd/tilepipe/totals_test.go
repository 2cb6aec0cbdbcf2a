package main

import "testing"

func TestTotals(t *testing.T) {
	for _, tc := range []struct {
		counts map[string]int
		want   string
	}{
		{map[string]int{"built": 55, "unsupported": 26}, "55 built, 26 unsupported"},
		{map[string]int{"failed": 1, "unavailable": 2, "unsupported": 3, "prepared": 4}, "4 prepared, 3 unsupported, 2 unavailable, 1 failed"},
		{map[string]int{"passed": 7, "failed": 0, "unsupported": 0}, "7 passed"},
		{map[string]int{"zeta": 1, "alpha": 2, "passed": 3}, "3 passed, 2 alpha, 1 zeta"},
		{map[string]int{"failed": 0}, "no rows"},
		{nil, "no rows"},
	} {
		if got := totals(tc.counts); got != tc.want {
			t.Errorf("totals(%v) = %q, want %q", tc.counts, got, tc.want)
		}
	}
}
