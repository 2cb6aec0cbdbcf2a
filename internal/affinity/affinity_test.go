package affinity

import (
	"os/exec"
	"slices"
	"testing"
)

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
