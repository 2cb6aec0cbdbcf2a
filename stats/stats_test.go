package stats

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.5, 2.5}, {0.25, 1.75}, {1, 4}} {
		if got := Quantile(s, tc.q); got != tc.want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", s, tc.q, got, tc.want)
		}
	}
	if got := Quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Quantile(nil, 0.5) = %v, want NaN", got)
	}
}

func TestRatiosVerdict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratios []float64
		want   string
	}{
		{"faster", []float64{0.70, 0.72, 0.69, 0.71, 0.70, 0.73}, Faster},
		{"slower", []float64{1.30, 1.28, 1.31, 1.29, 1.35, 1.30}, Slower},
		{"straddles", []float64{0.8, 1.2, 0.9, 1.1, 1.0, 1.05}, NoDifference},
		{"one round", []float64{0.5}, TooFew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Ratios(tc.ratios, 0.95, 2000, 1)
			if got := r.Verdict(); got != tc.want {
				t.Errorf("Ratios(%v).Verdict() = %q (lo %v hi %v), want %q", tc.ratios, got, r.Lo, r.Hi, tc.want)
			}
		})
	}
}

func TestRatiosDeterministic(t *testing.T) {
	xs := []float64{0.9, 1.1, 0.95, 1.2, 0.85, 1.0}
	a, b := Ratios(xs, 0.95, 1000, 7), Ratios(xs, 0.95, 1000, 7)
	if a != b {
		t.Errorf("Ratios(seed 7) twice = %+v and %+v, want equal", a, b)
	}
	if a.Lo < a.Min || a.Hi > a.Max || a.Lo > a.Median || a.Hi < a.Median {
		t.Errorf("Ratios(%v) = %+v, want Min <= Lo <= Median <= Hi <= Max", xs, a)
	}
}
