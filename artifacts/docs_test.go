package artifacts

import "testing"

// TestBuildBelowBest: a build's note is a non-empty string or absent; anything
// else is an error naming the field (prepare fails the entry with it).
func TestBuildBelowBest(t *testing.T) {
	for _, tc := range []struct {
		sched map[string]any
		want  string
		err   string
	}{
		{nil, "", ""},
		{map[string]any{"openblas_core": "Cooperlake"}, "", ""},
		{map[string]any{"below_best": "OpenBLAS runs Prescott kernels"}, "OpenBLAS runs Prescott kernels", ""},
		{map[string]any{"below_best": ""}, "", "schedule.below_best: want a non-empty string, got "},
		{map[string]any{"below_best": 3.0}, "", "schedule.below_best: want a non-empty string, got 3"},
		{map[string]any{"below_best": []any{"x"}}, "", "schedule.below_best: want a non-empty string, got [x]"},
	} {
		got, err := Build{Schedule: tc.sched}.BelowBest()
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("BelowBest(%v) = %q, %v; want %q, %q", tc.sched, got, err, tc.want, tc.err)
		}
	}
}
