// Package golden compares the tables people read with files committed
// beside the test that prints them, as benchstat's tests do: a test
// renders a table from a fixed input and calls Check; `go test -update`
// rewrites the files instead, and git diff shows what changed.
//
// Only tests import it (its -update flag is registered in every test
// binary that does).
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the tests print")

// Check compares got with testdata/NAME.golden of the calling test's
// package; with -update it writes got there instead. A difference fails
// the test with the first line that differs and how to accept it.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (go test -run '%s' -update writes it)", path, err, t.Name())
	}
	if msg := Diff(string(got), string(want)); msg != "" {
		t.Errorf("golden %s: %s\n(go test -run '%s' -update accepts the new output; git diff shows it)", path, msg, t.Name())
	}
}

// Diff is "" when got and want are equal, else where they first differ:
// the line number and both lines.
func Diff(got, want string) string {
	if got == want {
		return ""
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		gl, wl := line(g, i), line(w, i)
		if gl != wl {
			return fmt.Sprintf("line %d: got %s, want %s", i+1, gl, wl)
		}
	}
	return "differs" // unreachable: equal lines join to equal strings
}

func line(ls []string, i int) string {
	if i >= len(ls) {
		return "end of output"
	}
	return fmt.Sprintf("%q", ls[i])
}
