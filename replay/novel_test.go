package replay

import (
	"slices"
	"testing"
)

// TestDrawCalls: k distinct calls of n, in increasing order, every call
// reachable; k = n draws them all.
func TestDrawCalls(t *testing.T) {
	seen := make([]int, 10)
	for range 2000 {
		pick, err := drawCalls(10, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(pick) != 3 || !(0 <= pick[0] && pick[0] < pick[1] && pick[1] < pick[2] && pick[2] <= 9) {
			t.Fatalf("drawCalls(10, 3) = %v: want 3 distinct calls of 0 to 9, increasing", pick)
		}
		for _, c := range pick {
			seen[c]++
		}
	}
	// Each call is drawn 600 times in expectation (2000 x 3 / 10); a
	// draw that never reached the last calls, or favoured the first,
	// would be far off (the binomial's sd is about 20).
	for c, n := range seen {
		if n < 450 || n > 750 {
			t.Errorf("call %d drawn %d times in 2000 draws of 3 of 10, want about 600: %v", c, n, seen)
		}
	}
	if pick, _ := drawCalls(5, 5); !slices.Equal(pick, []int64{0, 1, 2, 3, 4}) {
		t.Errorf("drawCalls(5, 5) = %v, want every call", pick)
	}
}
