package visit

import "testing"

// TestNovelSizes: a sample's calls are the calibrated calls within the
// slots, at least one; its checks spread the visit's limit over the
// samples, at least one a sample, every call where a sample has fewer.
func TestNovelSizes(t *testing.T) {
	for _, c := range []struct {
		calls int64
		slots int
		want  int64
	}{{512, 2730, 512}, {4096, 170, 170}, {0, 10, 1}, {1, 1, 1}} {
		if got := NovelCalls(c.calls, c.slots); got != c.want {
			t.Errorf("NovelCalls(%d, %d) = %d, want %d", c.calls, c.slots, got, c.want)
		}
	}
	for _, c := range []struct {
		samples      int
		calls, limit int64
		want         int64
	}{{5, 1000, 700, 140}, {5, 100, 700, 100}, {3, 1000, 700, 234}, {2, 16, 700, 16},
		{5, 42, 9, 2}, {5, 42, 10, 2}, {5, 42, 11, 3}, {5, 42, 1, 1}, {5, 1, 9, 1}} {
		if got := ChecksPerSample(c.samples, c.calls, c.limit); got != c.want {
			t.Errorf("ChecksPerSample(%d, %d, %d) = %d, want %d", c.samples, c.calls, c.limit, got, c.want)
		}
	}
}

// TestFirstEqual: an element still holding the fill is found at its
// index, in every element size; an overwritten set has none.
func TestFirstEqual(t *testing.T) {
	for _, dtype := range []string{"f32", "f16", "i64"} {
		fill := FillPattern(dtype, 99)
		m, err := NewOutput("C", NewLayout(PoolFresh, 2, 8*len(fill)))
		if err != nil {
			t.Fatal(err)
		}
		m.FillSets(2, fill)
		if e := m.FirstEqual(1, fill); e != 0 {
			t.Errorf("%s: a filled set: FirstEqual = %d, want 0", dtype, e)
		}
		for i := range m.Set(0) {
			m.Set(0)[i] = 0
		}
		if e := m.FirstEqual(0, fill); e != -1 {
			t.Errorf("%s: an overwritten set: FirstEqual = %d, want -1", dtype, e)
		}
		copy(m.Set(0)[5*len(fill):], fill)
		if e := m.FirstEqual(0, fill); e != 5 {
			t.Errorf("%s: element 5 left: FirstEqual = %d, want 5", dtype, e)
		}
		if err := m.CheckCanary(); err != nil {
			t.Errorf("%s: FillSets wrote outside the sets: %v", dtype, err)
		}
		m.Close()
	}
}
