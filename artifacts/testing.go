package artifacts

import (
	"path/filepath"
	"testing"
)

// TestStore creates an empty store in a fresh temporary directory for a
// test, failing the test if it cannot.
func TestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Create(filepath.Join(t.TempDir(), "stage"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s
}

// CheckStage opens the stage at dir (every blob re-hashed) and checks
// ValidateStage's invariants, for the end of a stage's tests.
func CheckStage(t testing.TB, dir, artifactType string) {
	t.Helper()
	st, err := OpenStage(dir, artifactType, nil)
	if err != nil {
		t.Fatalf("CheckStage: %v", err)
	}
	if err := ValidateStage(st); err != nil {
		t.Errorf("CheckStage: %v", err)
	}
}
