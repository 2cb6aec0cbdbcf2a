// Package affinity keeps a visit's timed process and replay's own
// bookkeeping on different cores where the machine has enough
// (docs/threat-model.md, "Quiet-machine evidence"): the visit's process
// gets exactly as many cores as it has timed threads, replay keeps the
// rest; with too few cores they share them all, and the record says so.
package affinity

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Plan is where a replay session puts its visits and itself.
type Plan struct {
	// Visit: the cores every visit's process may run on (its mask, which
	// its threads inherit); Replay: the cores replay's own threads run on.
	Visit  []int `json:"visit"`
	Replay []int `json:"replay"`
	// Shared: the machine has fewer cores than the visit's threads and
	// one for replay, so both run on all of them; Why says so.
	Shared bool   `json:"shared"`
	Why    string `json:"why"`
}

// Choose splits the cores replay may use (avail, ascending) between
// threads timed threads and replay: the last threads cores for the
// visit, the ones before for replay, when there are more than threads.
func Choose(avail []int, threads int) Plan {
	if threads < len(avail) {
		n := len(avail) - threads
		return Plan{Visit: slices.Clone(avail[n:]), Replay: slices.Clone(avail[:n]),
			Why: fmt.Sprintf("%d cores: the visit's %d threads on %s, replay on %s", len(avail), threads, List(avail[n:]), List(avail[:n]))}
	}
	why := fmt.Sprintf("%d cores for %d timed threads and replay: shared (give --threads %d or fewer to keep replay off the visit's cores)", len(avail), threads, len(avail)-1)
	if len(avail) < 2 {
		why = fmt.Sprintf("%d core for %d timed threads and replay: shared", len(avail), threads)
	}
	return Plan{Visit: slices.Clone(avail), Replay: slices.Clone(avail), Shared: true, Why: why}
}

// Self is the cores this process may run on.
func Self() ([]int, error) { return Of(0) }

// Of is the cores process (or thread) pid may run on: its mask, read back.
func Of(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity %d: %w", pid, err)
	}
	var cores []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cores = append(cores, c)
		}
	}
	return cores, nil
}

func setOf(cores []int) *unix.CPUSet {
	var set unix.CPUSet
	set.Zero()
	for _, c := range cores {
		set.Set(c)
	}
	return &set
}

// PinSelf puts every thread of this process on cores; threads made later
// inherit the mask of the thread that makes them.
func PinSelf(cores []int) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, setOf(cores)); err != nil && err != unix.ESRCH {
			return fmt.Errorf("sched_setaffinity thread %d: %w", tid, err)
		}
	}
	return nil
}

// StartOn runs start (which starts a child process) on a thread whose
// mask is cores, so the child inherits it, and puts the thread's own mask
// back after.
func StartOn(cores []int, start func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := Of(0)
	if err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, setOf(cores)); err != nil {
		return fmt.Errorf("sched_setaffinity %s: %w", List(cores), err)
	}
	startErr := start()
	if err := unix.SchedSetaffinity(0, setOf(old)); err != nil {
		return fmt.Errorf("sched_setaffinity back to %s: %w", List(old), err)
	}
	return startErr
}

// List writes cores as /proc does (Cpus_allowed_list): "0-3,6".
func List(cores []int) string {
	s := ""
	for i := 0; i < len(cores); {
		j := i
		for j+1 < len(cores) && cores[j+1] == cores[j]+1 {
			j++
		}
		if s != "" {
			s += ","
		}
		if j > i {
			s += fmt.Sprintf("%d-%d", cores[i], cores[j])
		} else {
			s += strconv.Itoa(cores[i])
		}
		i = j + 1
	}
	return s
}

// Threads is the thread ids of process pid, ascending (none for a process
// that is gone).
func Threads(pid int) []int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	return tids
}

// Spread is the core of the i-th thread (ascending thread ids) of a
// process whose threads are pinned over cores: one core each, in turn,
// so the first len(cores) threads are on distinct cores.
func Spread(cores []int, i int) int { return cores[i%len(cores)] }

// Pin puts thread tid on the one core core; a thread that has ended is
// not an error. Threads it makes later inherit that core.
func Pin(tid, core int) error {
	if err := unix.SchedSetaffinity(tid, setOf([]int{core})); err != nil && err != unix.ESRCH {
		return fmt.Errorf("sched_setaffinity thread %d: %w", tid, err)
	}
	return nil
}
