package oracle

import "testing"

// TestAttentionHalfCheats: the half-storage attention bound admits the
// weights rounded to the storage type before P·V (docs/oracle.md,
// "attention in half storage"), and no coarser: a kernel that keeps P in
// FP8 (E4M3, 3 mantissa bits) to run P·V faster, in an otherwise honest
// FlashAttention-2 loop, fails the strict check with the element named.
func TestAttentionHalfCheats(t *testing.T) {
	t.Parallel()
	dims := map[string]int{"B": 1, "Hq": 4, "Hkv": 2, "Q": 5, "K": 300, "D": 64, "Dv": 32}
	for _, tc := range []struct{ dtype, fp8, reason string }{
		{"f16", "p-mant3", "bound: O[0] = 0.03479004, want 0.0367090711 ± 0.000986 (400 of 640 elements outside)"},
		// bf16's own rounding is 2^-9: E4M3's 2^-4 on the weights is
		// caught, but at one element of 640 (docs/oracle.md); E5M2 at 69.
		{"bf16", "p-mant3", "bound: O[255] = -0.08154297, want -0.0891343361 ± 0.00733 (1 of 640 elements outside)"},
		{"bf16", "p-mant2", "bound: O[1] = -0.12890625, want -0.119978734 ± 0.00663 (69 of 640 elements outside)"},
	} {
		c := Case{ID: "attention-" + tc.dtype, Op: "attention", Dims: dims, Dtype: tc.dtype, Pattern: "normal", Seed: 1, Policy: "strict"}
		in, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := Reference(c, in)
		if err != nil {
			t.Fatal(err)
		}
		honest := attentionImpl("flash64/libm/fma/p-half", 64, expLibm, dotters[1], true)
		if v := Compare(c, exp, honest.outputs(c, in)); !v.Pass {
			t.Fatalf("%s: the honest P-in-storage kernel fails: %s", c.ID, v.Reason)
		}
		cheat := attentionImpl("flash64/libm/fma/"+tc.fp8, 64, expLibm, dotters[1], true)
		v := Compare(c, exp, cheat.outputs(c, in))
		if v.Pass || v.Reason != tc.reason {
			t.Errorf("%s: P in FP8 (%s) = pass %v %q, want fail %q", c.ID, tc.fp8, v.Pass, v.Reason, tc.reason)
		}
	}
}
