package oracle

import "testing"

// TestDiscriminates feeds the check cases that a trivial output passes,
// and one that no trivial output passes.
func TestDiscriminates(t *testing.T) {
	for _, tc := range []struct {
		c    Case
		want string
	}{
		{Case{ID: "sum-cancel", Op: "sum", Dims: map[string]int{"M": 64, "N": 4096}, Dtype: "f32", Pattern: "adversarial", Seed: 73, Policy: "strict"},
			"non_discriminating: case sum-cancel: output Y filled with all zeros passes its bound (the other outputs right); choose another pattern, size or seed"},
		{Case{ID: "sum-copy", Op: "sum", Dims: map[string]int{"M": 1000, "N": 1}, Dtype: "f32", Pattern: "normal", Seed: 74, Policy: "strict"},
			"non_discriminating: case sum-copy: output Y filled with a copy of input X passes its bound (the other outputs right); choose another pattern, size or seed"},
		{Case{ID: "argmax-ties", Op: "argmax", Dims: map[string]int{"M": 100, "N": 333}, Dtype: "f32", Pattern: "ties", Seed: 122, Policy: "strict"},
			"non_discriminating: case argmax-ties: output V filled with the constant 3.75 passes its bound (the other outputs right); choose another pattern, size or seed"},
		{Case{ID: "argmax-ties-narrow", Op: "argmax", Dims: map[string]int{"M": 100, "N": 24}, Dtype: "f32", Pattern: "ties", Seed: 122, Policy: "strict"}, ""},
		{Case{ID: "gemm", Op: "gemm", Dims: map[string]int{"M": 8, "N": 8, "K": 8}, Dtype: "f32", Pattern: "normal", Seed: 1, Policy: "strict"}, ""},
	} {
		in, err := Generate(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := Reference(tc.c, in)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := Discriminates(tc.c, in, exp); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Discriminates(%s) = %q, want %q", tc.c.ID, got, tc.want)
		}
	}
}
