package audit

import (
	"reflect"
	"testing"
)

func TestClockAgrees(t *testing.T) {
	tests := []struct {
		name     string
		recorded []float64
		mine     float64
		p, w     []string
	}{
		{"the same machine", []float64{3.0e9, 3.1e9}, 3.0e9, nil, nil},
		{"up to 1.25x", []float64{3.75e9}, 3.0e9, nil, nil},
		{"a faster machine", []float64{4.5e9}, 3.0e9, nil, []string{"session 0: recorded clock 4.50 GHz, 1.50x this machine's 3.00 GHz: machines differ or the clock was forged"}},
		{"twice, as this machine's own clock reads from run to run", []float64{3.66e9}, 1.83e9, nil, []string{"session 0: recorded clock 3.66 GHz, 2.00x this machine's 1.83 GHz: machines differ or the clock was forged"}},
		{"more than 3x", []float64{3e9, 6.3e9}, 2.0e9, []string{"session 1: recorded clock 6.30 GHz, more than 3x this machine's 2.00 GHz: a higher clock lowers every compute floor"}, []string{"session 0: recorded clock 3.00 GHz, 1.50x this machine's 2.00 GHz: machines differ or the clock was forged"}},
		{"above any CPU", []float64{7e9}, 5e9, []string{"session 0: recorded clock 7.00 GHz, above what any CPU sustains (6.5 GHz); this machine measures 5.00 GHz"}, nil},
		{"a slower replay machine", []float64{1e9}, 5e9, nil, nil},
	}
	for _, tt := range tests {
		p, w := clockAgrees(tt.recorded, tt.mine)
		if !reflect.DeepEqual(p, tt.p) || !reflect.DeepEqual(w, tt.w) {
			t.Errorf("clockAgrees(%s) = %q, %q; want %q, %q", tt.name, p, w, tt.p, tt.w)
		}
	}
}

func TestFlagsAgree(t *testing.T) {
	mine := []string{"avx", "avx2", "fma", "sse2"}
	if w := flagsAgree([]string{"avx2", "fma", "sse4_2"}, mine); w != nil {
		t.Errorf("flagsAgree(a subset, and a non-vector flag) = %q, want none", w)
	}
	want := []string{
		"the replay's CPU flags include avx512f, which this machine lacks: the compute floors assume it (machines differ or the flags were forged)",
		"the replay's CPU flags include amx_bf16, which this machine lacks: the compute floors assume it (machines differ or the flags were forged)",
	}
	if w := flagsAgree([]string{"amx_bf16", "avx2", "avx512f"}, mine); !reflect.DeepEqual(w, want) {
		t.Errorf("flagsAgree(avx512f, amx_bf16) = %q, want %q", w, want)
	}
	if got := vectorFlags([]string{"sse2", "fma", "avx2"}); got != "avx2 fma" {
		t.Errorf("vectorFlags = %q, want avx2 fma", got)
	}
}
