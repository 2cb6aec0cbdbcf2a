package load

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ name, stat, want string }{
		{"kernel 6", "cpu  100 5 50 9000 3 2 1 7 0 0\ncpu0 50 2 25 4500 1 1 0 3 0 0\n", ""},
		{"no cpu line", "intr 1 2 3\n", `first line "intr 1 2 3": want "cpu" and at least 8 tick counts`},
		{"too short", "cpu  1 2 3\n", `first line "cpu  1 2 3": want "cpu" and at least 8 tick counts`},
		{"not a number", "cpu  1 2 x 4 5 6 7 8\n", `first line "cpu  1 2 x 4 5 6 7 8": field 3 "x": want a tick count`},
		{"negative", "cpu  1 2 3 4 5 6 7 -8\n", `first line "cpu  1 2 3 4 5 6 7 -8": field 8 "-8": want a tick count`},
	} {
		s, err := parse([]byte(tc.stat))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: parse = %v, want %q", tc.name, err, tc.want)
		}
		if tc.want == "" && (s.BusyNs != (100+5+50+2+1)*TickNs || s.StealNs != 7*TickNs) {
			t.Errorf("%s: parse = %+v, want busy 158 ticks, steal 7", tc.name, s)
		}
	}
}

// TestRead reads this machine's /proc/stat, and names a file that is not
// one.
func TestRead(t *testing.T) {
	s, err := Read(StatPath)
	if err != nil || s.BusyNs <= 0 || s.SelfNs <= 0 {
		t.Errorf("Read(%s) = %+v, %v: want busy and self time", StatPath, s, err)
	}
	p := filepath.Join(t.TempDir(), "stat")
	os.WriteFile(p, []byte("cpu0 1 2 3\n"), 0o644)
	if _, err := Read(p); err == nil || !strings.HasPrefix(err.Error(), p+": first line") {
		t.Errorf("Read(a per-CPU line only) = %v, want an error naming %s", err, p)
	}
}

// TestOther: the visit's and replay's own CPU time are not load; what is
// left over is, as is steal; a quarter of a core of it flags the visit.
func TestOther(t *testing.T) {
	before := Snapshot{BusyNs: 10e9, StealNs: 1e9, SelfNs: 2e9}
	after := Snapshot{BusyNs: 13e9, StealNs: 1e9, SelfNs: 2.5e9}
	other, steal := Other(before, after, 2e9) // 3 s busy: 2 s the visit's, 0.5 s replay's
	if other != 0.5e9 || steal != 0 {
		t.Errorf("Other = %d, %d; want 0.5 s of other load, no steal", other, steal)
	}
	if o, _ := Other(before, after, 3.2e9); o != 0 {
		t.Errorf("Other with the visit's time above the ticks' = %d, want 0 (ticks round)", o)
	}
	for _, tc := range []struct {
		other, steal, wall int64
		want               bool
	}{{0.5e9, 0, 2e9, false}, {0.5e9, 0, 1.9e9, true}, {0, 0.6e9, 2e9, true}, {0.3e9, 0.3e9, 2e9, true}, {1, 0, 0, false}} {
		if got := Loaded(tc.other, tc.steal, tc.wall); got != tc.want {
			t.Errorf("Loaded(other %d, steal %d, wall %d) = %v, want %v", tc.other, tc.steal, tc.wall, got, tc.want)
		}
	}
}

// TestReadHelpers: a helper process's CPU time counts as replay's own (a
// busy child's seconds show in SelfNs only when it is named); a stat line
// whose command name holds ") (" still parses; a helper that is gone is an
// error naming its file.
func TestReadHelpers(t *testing.T) {
	cmd := exec.Command("sh", "-c", "end=$(($(date +%s) + 2)); while [ $(date +%s) -lt $end ]; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	time.Sleep(1200 * time.Millisecond)
	with, err := Read(StatPath, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	without, _ := Read(StatPath)
	if d := with.SelfNs - without.SelfNs; d < 5*TickNs {
		t.Errorf("a busy helper after 1.2 s adds %d ns to SelfNs, want at least 5 ticks", d)
	}
	p := filepath.Join(t.TempDir(), "stat")
	os.WriteFile(p, []byte("42 (a) (b) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 100 1000 10\n"), 0o644)
	if ns, err := processCPU(p); err != nil || ns != 10*TickNs {
		t.Errorf("processCPU(a name with \") (\") = %d, %v; want 10 ticks", ns, err)
	}
	if _, err := Read(StatPath, 1<<30); err == nil || !strings.Contains(err.Error(), "/proc/1073741824/stat") {
		t.Errorf("Read with a helper that is gone = %v, want an error naming its stat file", err)
	}
}
