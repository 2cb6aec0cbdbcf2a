// Package testroute holds naive, a route written only for tilepipe's tests:
// a third-party route program (route, Python, stdlib only) that builds
// plain C kernels and, on request, deliberately broken ones.
package testroute

import (
	"path/filepath"
	"runtime"
	"testing"
)

// Path is the naive route program, for --route-exec.
func Path(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testroute: cannot locate the route program")
	}
	return filepath.Join(filepath.Dir(file), "naive", "route")
}

// Faults are the deliberate defects naive can build (TILEPIPE_TEST_FAULT).
var Faults = []string{"none", "halfwrite", "overrun", "mutate", "nondeterministic", "offbybound", "crash"}
