package visit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFreeze: a timer that leaves two counters running, one in its own
// process group and one that left it with setsid (as an adversary hiding
// a helper would), makes no progress while the visit is frozen and
// resumes when it is thawed. The freeze is what lets replay write inputs
// no process of the visit can read before the clock runs
// (docs/protocol4-design.md).
func TestFreeze(t *testing.T) {
	l, err := ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here (%v): protocol 4 visits cannot run on this machine", err)
	}
	dir := t.TempDir()
	counter := `i=0; while :; do i=$((i+1)); echo $i > "$1.tmp"; mv "$1.tmp" "$1"; done`
	timer := shPrelude + `
/bin/sh -c '` + counter + `' sh "$PWD/inner" &
setsid /bin/sh -c '` + counter + `' sh "$PWD/escaped" &
` + honest
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	var frozen, thawed [2][2]string
	var froze time.Duration
	var dirs []string
	keepState, cycleErr := "", ""
	run, err := RunAll(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", timer}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, Timeout: 20 * time.Second, Threads: 3, Limiter: l},
		func(s *Session) ([]Sample, int64, error) {
			// Both counters have started.
			for end := time.Now().Add(5 * time.Second); (read("inner") == "" || read("escaped") == "") && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			t0 := time.Now()
			if err := s.Freeze(); err != nil {
				return nil, 0, err
			}
			froze = time.Since(t0)
			dirs = []string{s.cgroup.dir, s.cgroup.freezer, s.cgroup.keep}
			if s.cgroup.keep != "" {
				b, _ := os.ReadFile(filepath.Join(s.cgroup.keep, "freezer.state"))
				keepState = strings.TrimSpace(string(b))
			}
			for i, name := range []string{"inner", "escaped"} {
				frozen[i][0] = read(name)
			}
			time.Sleep(200 * time.Millisecond)
			for i, name := range []string{"inner", "escaped"} {
				frozen[i][1] = read(name)
			}
			if err := s.Thaw(); err != nil {
				return nil, 0, err
			}
			for i, name := range []string{"inner", "escaped"} {
				thawed[i][0] = read(name)
			}
			time.Sleep(200 * time.Millisecond)
			for i, name := range []string{"inner", "escaped"} {
				thawed[i][1] = read(name)
			}
			// The report's freeze cycles: only of a frozen visit, which
			// they leave frozen.
			if _, err := s.FreezeCycle(3); err == nil || err.Error() != "visit: a freeze cycle of a visit that is not frozen" {
				cycleErr = fmt.Sprintf("freeze cycles of a running visit: %v", err)
			} else if err := s.Freeze(); err != nil {
				return nil, 0, err
			} else if d, err := s.FreezeCycle(3); err != nil || d <= 0 || !s.frozen {
				cycleErr = fmt.Sprintf("freeze cycles of a frozen visit: %v, %v, frozen after: %v", d, err, s.frozen)
			}
			return nil, 0, s.Thaw()
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("froze in %v; frozen %v, thawed %v", froze, frozen, thawed)
	for i, name := range []string{"inner", "escaped"} {
		if frozen[i][0] == "" || frozen[i][0] != frozen[i][1] {
			t.Errorf("%s counter while frozen: %q then %q, want the same count", name, frozen[i][0], frozen[i][1])
		}
		if thawed[i][0] == thawed[i][1] {
			t.Errorf("%s counter after thaw: %q then %q, want it counting again", name, thawed[i][0], thawed[i][1])
		}
	}
	if cycleErr != "" {
		t.Error(cycleErr)
	}
	// On v1 the visit's empty sibling is kept FROZEN (it holds the
	// freezer's static key on, docs/results/2026-12-03-bracket), and
	// every cgroup of the visit is gone once it ends.
	if !l.v2 && keepState != "FROZEN" {
		t.Errorf("v1 keeper cgroup %q: state %q, want FROZEN", dirs[2], keepState)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); d != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still there after the visit (%v)", d, err)
		}
	}
	// Both helpers were still running when the timer answered "end".
	if want := "left_processes: "; !strings.HasPrefix(run.Reason, want) {
		t.Errorf("reason = %q, want %q...", run.Reason, want)
	}
}

// TestFrozenTimeout: a visit that runs past its timeout while frozen is
// killed and ends as timed out (a frozen v1 task dies only once thawed,
// so the kill thaws it).
func TestFrozenTimeout(t *testing.T) {
	l, err := ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here (%v)", err)
	}
	start := time.Now()
	run, err := RunAll(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", shPrelude + honest}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Timeout: time.Second, Threads: 1, Limiter: l},
		func(s *Session) ([]Sample, int64, error) {
			if err := s.Freeze(); err != nil {
				return nil, 0, err
			}
			time.Sleep(1500 * time.Millisecond)
			_, _, err := s.Sample(1)
			return nil, 0, err
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := "timed_out: after 1s"; !strings.HasPrefix(run.Reason, want) {
		t.Errorf("a visit frozen past its timeout = %q, want %q", run.Reason, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the frozen visit took %v to end", d)
	}
}

// TestFreezeDeadline: a visit whose processes are not all frozen by the
// deadline fails not_frozen, and nothing of it is left: its processes are
// thawed and killed, its cgroups removed. No process found in user space
// holds a freeze off for FreezeWait (a fork loop only delays v1's, which
// freeze retries), so the test lowers the deadline to 0 and keeps 20
// processes spinning on two cores: a running or runnable task freezes
// only once it next enters the kernel, and replay looks once, at once.
// Even so about 1 visit in 30 here was frozen at that look (2 of 60), so
// the test makes up to 5 visits: each must end not_frozen, or, frozen,
// left_processes (the spinners outlive the timer), and be cleaned up;
// at least one must miss the deadline.
func TestFreezeDeadline(t *testing.T) {
	l, err := ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here (%v)", err)
	}
	defer func(w time.Duration) { freezeWait = w }(freezeWait)
	freezeWait = 0
	const spinners = 20
	const missed = "not_frozen: the visit's processes were not all frozen 0s after replay froze its cgroup"
	for attempt := 1; ; attempt++ {
		reason := freezeDeadlineVisit(t, l, spinners)
		if reason == missed {
			return
		}
		if want := fmt.Sprintf("left_processes: %d other process(es) (sh, sh, sh, ...) still running at the final report", spinners); reason != want {
			t.Fatalf("attempt %d: reason = %q, want %q (or, frozen at the first look, %q)", attempt, reason, missed, want)
		}
		if attempt == 5 {
			t.Fatalf("5 visits of %d spinners were all frozen at replay's first look; want one to miss the deadline", spinners)
		}
	}
}

// freezeDeadlineVisit runs one visit of TestFreezeDeadline: it freezes
// once its spinners run, checks that they and the visit's cgroups are gone
// after it, and returns its reason.
func freezeDeadlineVisit(t *testing.T, l *Limiter, spinners int) string {
	t.Helper()
	dir := t.TempDir()
	timer := shPrelude + fmt.Sprintf(`
for i in $(seq 1 %d); do /bin/sh -c 'echo $$ > "$0"; while :; do :; done' "$PWD/spin$i" & done
`, spinners) + honest
	pids := func() []string {
		var out []string
		for i := 1; i <= spinners; i++ {
			// Whole only once it ends in a newline: echo truncates first.
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("spin%d", i)))
			if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
				return nil
			}
			out = append(out, strings.TrimSpace(string(b)))
		}
		return out
	}
	var dirs, started []string
	run, err := RunAll(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", timer}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, Timeout: 20 * time.Second, Threads: spinners, Limiter: l},
		func(s *Session) ([]Sample, int64, error) {
			for end := time.Now().Add(5 * time.Second); started == nil && time.Now().Before(end); {
				if started = pids(); started == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
			dirs = []string{s.cgroup.dir, s.cgroup.freezer, s.cgroup.keep}
			return nil, 0, s.Freeze()
		})
	if err != nil {
		t.Fatal(err)
	}
	if started == nil {
		t.Fatalf("the %d spinners did not all start in 5 s", spinners)
	}
	for i, pid := range started {
		// Gone, or exited and waiting for its new parent (PID 1 or a
		// subreaper, not this test) to reap it.
		if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] != "Z" {
				t.Errorf("spinner %d (pid %s) still running after the visit (%s): state %s", i+1, pid, run.Reason, f[0])
			}
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); d != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still there after the visit (%v)", d, err)
		}
	}
	return run.Reason
}

// TestSweep: the cgroups a killed replay left (an empty visit cgroup, its
// v1 keeper, FROZEN) are removed once a minute old; a younger one, one of
// a live process and one not named by tilepipe stay, and one with a
// process in it cannot be removed at all (sweep only ever removes).
func TestSweep(t *testing.T) {
	l, err := ProbeLimiter()
	if err != nil {
		t.Skipf("no cgroup here (%v)", err)
	}
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	roots := []string{l.base}
	if l.freezer != "" {
		roots = append(roots, l.freezer)
	}
	old := time.Now().Add(-2 * staleAge)
	mk := func(root, name string, mtime time.Time) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(d) })
		if err := os.Chtimes(d, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return d
	}
	var gone, kept []string
	for _, root := range roots {
		gone = append(gone, mk(root, fmt.Sprintf("tilepipe-%d-visit-1", pid), old))
		kept = append(kept,
			mk(root, fmt.Sprintf("tilepipe-%d-visit-2", pid), time.Now()),
			mk(root, "tilepipe-1-visit-3", old),
			mk(root, fmt.Sprintf("other-%d-visit-4", pid), old))
	}
	if l.freezer != "" {
		k := mk(l.freezer, fmt.Sprintf("tilepipe-%d-visit-1-keep", pid), old)
		if err := os.WriteFile(filepath.Join(k, "freezer.state"), []byte("FROZEN"), 0); err != nil {
			t.Fatal(err)
		}
		gone = append(gone, k)
	}
	l.sweep()
	for _, d := range gone {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: still there after the sweep (%v), want it removed", d, err)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v after the sweep, want it kept", d, err)
		}
	}
}
