package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestHit runs this test binary as a child that calls Hit("a") three
// times, printing a line after each: TILEPIPE_CRASH_AT=a:2 must kill it by
// SIGKILL after exactly one line; a point of another name, a malformed
// value or none must let all three calls pass.
func TestHit(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		for range 3 {
			Hit("a")
			os.Stdout.WriteString("passed\n")
		}
		os.Exit(0)
	}
	for _, tc := range []struct {
		env    string
		lines  int
		killed bool
	}{
		{"a:2", 1, true},
		{"a:1", 0, true},
		{"b:1", 3, false},
		{"a:0", 3, false},
		{"a", 3, false},
		{"", 3, false},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHit$")
		cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", "TILEPIPE_CRASH_AT="+tc.env)
		out, err := cmd.Output()
		var ee *exec.ExitError
		killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if err != nil && !killed {
			t.Fatalf("TILEPIPE_CRASH_AT=%q: child failed: %v", tc.env, err)
		}
		if got := strings.Count(string(out), "passed\n"); got != tc.lines || killed != tc.killed {
			t.Errorf("TILEPIPE_CRASH_AT=%q: %d calls passed, killed %v; want %d, killed %v", tc.env, got, killed, tc.lines, tc.killed)
		}
	}
}
