package audit

import (
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

func TestMinBytes(t *testing.T) {
	for _, tc := range []struct {
		c    oracle.Case
		want int
	}{
		// Every tensor once: A, B and C of a 4x4x4 gemm.
		{oracle.Case{ID: "g", Op: "gemm", Dims: map[string]int{"M": 4, "N": 4, "K": 4}, Dtype: "f32", Pattern: "normal", Policy: "strict"}, 3 * 64},
		// A gather reads M rows of the table, not the table: ids 8 x 8 B,
		// rows 8 x 16 x 4 B, output the same again.
		{oracle.Case{ID: "e", Op: "embedding", Dims: map[string]int{"V": 1000, "D": 16, "M": 8}, Dtype: "f32", Pattern: "normal", Policy: "strict"}, 64 + 512 + 512},
	} {
		sig, err := oracle.Signature(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if got := minBytes(tc.c, sig); got != tc.want {
			t.Errorf("minBytes(%s) = %d, want %d", tc.c.Op, got, tc.want)
		}
	}
}
