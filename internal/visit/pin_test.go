package visit

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/internal/affinity"
	"golang.org/x/sys/unix"
)

// TestPinLateFork: a process forked by a thread the pinning walk has not
// reached keeps the wide mask, and one walk of /proc misses it (it is
// listed after the walk read its maker, or not at all). pinThreads walks
// again until a walk pins nothing: the fork, made here between the first
// and second walks by a shell whose mask the test widened again, ends on
// one core, and Pins then fails the shell, which left its core.
func TestPinLateFork(t *testing.T) {
	cores, err := affinity.Self()
	if err != nil || len(cores) < 2 {
		t.Skipf("needs two cores (have %v, %v)", cores, err)
	}
	s, err := Start(context.Background(), Spec{
		Argv:    []string{"/bin/sh", "-c", "trap 'sleep 31 &' USR1; sleep 30 & while :; do wait; done"},
		Env:     []string{"PATH=/usr/bin:/bin"},
		Dir:     t.TempDir(),
		Timeout: time.Minute, Threads: 1, Cores: cores,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	sh := s.cmd.Process.Pid
	waitKids := func(n int) []proc {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if kids := descendants(sh); len(kids) >= n {
				return kids
			}
		}
		t.Fatalf("the shell has not %d children after 5 s", n)
		return nil
	}
	first := waitKids(1)[0].pid

	passes := 0
	pinPassHook = func(pass int) {
		passes++
		if pass != 0 {
			return
		}
		// The shell as a thread the walk has not reached: wide again, it
		// forks a child that inherits the wide mask.
		var wide unix.CPUSet
		for _, c := range cores {
			wide.Set(c)
		}
		if err := unix.SchedSetaffinity(sh, &wide); err != nil {
			t.Error(err)
		}
		syscall.Kill(sh, syscall.SIGUSR1)
		waitKids(2)
	}
	t.Cleanup(func() { pinPassHook = nil })
	if err := s.pinThreads(); err != nil {
		t.Fatal(err)
	}
	if passes < 2 {
		t.Errorf("pinThreads walked %d time(s) after pinning, want a second walk for the late fork", passes)
	}
	var late int
	for _, p := range descendants(sh) {
		if p.pid != first {
			late = p.pid
		}
	}
	if got, _ := affinity.Of(late); len(got) != 1 {
		t.Errorf("the late fork %d is on cores %v after pinThreads, want one core", late, got)
	}
	if _, ok := s.pinned[late]; !ok {
		t.Errorf("the late fork %d is not among the pinned threads %v", late, s.pinned)
	}
	want := "affinity_widened: a pinned thread left its core: thread " + itoa(sh)
	if _, err := s.Pins(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Pins = %v, want %q...", err, want)
	}
	if !slices.Contains(cores, s.pinned[late]) {
		t.Errorf("the late fork's core %d is not one of the visit's %v", s.pinned[late], cores)
	}
}
