// Package testroute holds routes written only for tilepipe's tests: naive,
// a third-party route program (route, Python, stdlib only) that builds
// plain C kernels and, on request, deliberately broken or adversarial ones;
// and imposter, the torch-eager route running one of its wrapper's test
// ops (a process route whose timer misbehaves).
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

// Imposter is the imposter route program, for --route-exec.
func Imposter(t testing.TB) string {
	t.Helper()
	return filepath.Join(filepath.Dir(Path(t)), "..", "imposter", "route")
}

// Faults are the deliberate defects naive can build (TILEPIPE_TEST_FAULT).
var Faults = []string{"none", "halfwrite", "overrun", "mutate", "nondeterministic", "offbybound", "crash"}
