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
