package affinity

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestMain: with TILEPIPE_AFFINITY_CHILD set, the test binary is a child
// of several threads for TestPinThreads (four goroutines, each locked to
// a thread of its own, asleep).
func TestMain(m *testing.M) {
	if os.Getenv("TILEPIPE_AFFINITY_CHILD") != "" {
		for range 4 {
			go func() {
				runtime.LockOSThread()
				time.Sleep(time.Minute)
			}()
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChoose: enough cores put replay off the visit's; too few share
// them, saying so.
func TestChoose(t *testing.T) {
	p := Choose([]int{0, 1, 2, 3}, 2)
	if !slices.Equal(p.Visit, []int{2, 3}) || !slices.Equal(p.Replay, []int{0, 1}) || p.Shared || p.Why != "4 cores: the visit's 2 threads on 2-3, replay on 0-1" {
		t.Errorf("4 cores, 2 threads: %+v", p)
	}
	p = Choose([]int{0, 1}, 2)
	if !p.Shared || !slices.Equal(p.Visit, []int{0, 1}) || p.Why != "2 cores for 2 timed threads and replay: shared (give --threads 1 or fewer to keep replay off the visit's cores)" {
		t.Errorf("2 cores, 2 threads: %+v", p)
	}
	if got := List([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("List = %q", got)
	}
}

// TestStartOn: a child started by StartOn runs on the cores given (read
// back from the kernel), and the starting thread gets its mask back. On a
// machine of one core there is nothing to split.
func TestStartOn(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if len(self) < 2 {
		t.Skip("one core")
	}
	want := self[len(self)-1:]
	cmd := exec.Command("sleep", "5")
	if err := StartOn(want, cmd.Start); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	got, err := Of(cmd.Process.Pid)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("child's cores = %v (%v), want %v", got, err, want)
	}
	if after, _ := Self(); !slices.Equal(after, self) {
		t.Errorf("this process's cores after = %v, want %v back", after, self)
	}
}

// TestPin: a child of several threads, pinned thread by thread by Spread,
// reads back one core per thread, in turn, so its first threads are on
// distinct cores.
func TestPin(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TILEPIPE_AFFINITY_CHILD=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); len(Threads(pid)) < 5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	tids := Threads(pid)
	if len(tids) < 5 {
		t.Fatalf("Threads(%d) = %v, want at least 5 threads (main and four locked)", pid, tids)
	}
	for i, tid := range tids {
		if err := Pin(tid, Spread(self, i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, tid := range tids {
		if got, err := Of(tid); err != nil || !slices.Equal(got, []int{Spread(self, i)}) {
			t.Errorf("thread %d: cores %v (%v), want [%d]", tid, got, err, Spread(self, i))
		}
	}
	if got := []int{Spread([]int{4, 6}, 0), Spread([]int{4, 6}, 1), Spread([]int{4, 6}, 2)}; !slices.Equal(got, []int{4, 6, 4}) {
		t.Errorf("Spread over 4,6 = %v, want [4 6 4]", got)
	}
	if err := Pin(1<<22+1, self[0]); err != nil {
		t.Errorf("Pin of a thread that is not there = %v, want no error", err)
	}
}
