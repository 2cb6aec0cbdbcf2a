package oracle

import (
	"runtime"
	"sync"
)

// minChunk is the fewest elements a goroutine of [parallel] takes: below
// it, starting one costs more than its share of the work.
const minChunk = 1 << 16

// parallel runs f on contiguous chunks that cover [0, n) exactly once, on
// up to GOMAXPROCS goroutines, each chunk starting at a multiple of align,
// and returns when every chunk is done. The oracle's elementwise passes
// (generating inputs, checking them, the reference of pointwise ops,
// comparing outputs) run through it: each element's result depends on
// that element alone, so the split changes no bit of any result, and a
// large case runs at the memory speed of every core replay or the audit
// has, not one core's (docs/oracle.md, "Cost").
func parallel(n, align int, f func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n/minChunk)
	if w <= 1 {
		f(0, n)
		return
	}
	step := (n + w - 1) / w
	step = (step + align - 1) / align * align
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += step {
		wg.Go(func() { f(lo, min(lo+step, n)) })
	}
	wg.Wait()
}

// firstIndex is the least index in [0, n) that first finds in its chunk
// (first(lo, hi) returns the least bad index in [lo, hi), or -1), or -1:
// the earliest chunk's wins.
func firstIndex(n int, first func(lo, hi int) int) int {
	found := -1
	var mu sync.Mutex
	parallel(n, 1, func(lo, hi int) {
		if i := first(lo, hi); i >= 0 {
			mu.Lock()
			if found < 0 || i < found {
				found = i
			}
			mu.Unlock()
		}
	})
	return found
}
