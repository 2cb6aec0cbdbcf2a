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

// TestBuildOwnGraphs: the same for schedule.own_graphs.
func TestBuildOwnGraphs(t *testing.T) {
	for _, tc := range []struct {
		sched map[string]any
		want  string
		err   string
	}{
		{map[string]any{"cudagraphs": "used"}, "", ""},
		{map[string]any{"own_graphs": "cudagraph trees"}, "cudagraph trees", ""},
		{map[string]any{"own_graphs": true}, "", "schedule.own_graphs: want a non-empty string, got true"},
	} {
		got, err := Build{Schedule: tc.sched}.OwnGraphs()
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("OwnGraphs(%v) = %q, %v; want %q, %q", tc.sched, got, err, tc.want, tc.err)
		}
	}
}

// TestBuildCold: a build's cold costs are both fields, positive and
// finite, or neither; anything else is an error naming the fields
// (prepare fails the entry with it).
func TestBuildCold(t *testing.T) {
	const bad = "schedule.compile_first_call_s and cached_first_call_s: want two positive numbers of seconds, got "
	for _, tc := range []struct {
		sched map[string]any
		want  *ColdCost
		err   string
	}{
		{nil, nil, ""},
		{map[string]any{"mode": "max-autotune"}, nil, ""},
		{map[string]any{"compile_first_call_s": 41.5, "cached_first_call_s": 3.25}, &ColdCost{41.5, 3.25}, ""},
		{map[string]any{"compile_first_call_s": 41.5}, nil, bad + "41.5 and <nil>"},
		{map[string]any{"compile_first_call_s": 0.0, "cached_first_call_s": 3.25}, nil, bad + "0 and 3.25"},
		{map[string]any{"compile_first_call_s": 41.5, "cached_first_call_s": "3"}, nil, bad + "41.5 and 3"},
		{map[string]any{"compile_first_call_s": -1.0, "cached_first_call_s": 3.25}, nil, bad + "-1 and 3.25"},
	} {
		got, err := Build{Schedule: tc.sched}.Cold()
		if !got.Same(tc.want) || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("Cold(%v) = %v, %v; want %v, %q", tc.sched, got, err, tc.want, tc.err)
		}
	}
}
