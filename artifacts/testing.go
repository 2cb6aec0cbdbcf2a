package artifacts

import "path/filepath"

// TB is what the test helpers below need of a testing.TB. They take this
// rather than testing.TB so that the store, which the binary links, does
// not link the testing package with them (issue 28's binary weight).
type TB interface {
	Helper()
	TempDir() string
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// TestStore creates an empty store in a fresh temporary directory for a
// test, failing the test if it cannot.
func TestStore(t TB) *Store {
	t.Helper()
	s, err := Create(filepath.Join(t.TempDir(), "stage"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s
}

// CheckStage opens the stage at dir (every blob re-hashed) and checks
// ValidateStage's invariants, for the end of a stage's tests.
func CheckStage(t TB, dir, artifactType string) {
	t.Helper()
	st, err := OpenStage(dir, artifactType, nil)
	if err != nil {
		t.Fatalf("CheckStage: %v", err)
	}
	if err := ValidateStage(st); err != nil {
		t.Errorf("CheckStage: %v", err)
	}
}
