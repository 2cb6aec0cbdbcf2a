package visit

import (
	"fmt"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/affinity"
)

// pinThreads puts every thread of every process of the visit on one core
// of the visit's mask (affinity.Spread, in thread-id order per process),
// once the validation calls have made the kernel's thread pools: the
// timed threads then run on distinct cores, and a thread made later
// inherits its maker's one core. [Session.Pins] reads the masks back.
//
// One walk of /proc is not enough: a thread that was not yet pinned can
// fork or clone while the walk goes on, and its new thread, listed after
// the walk read its process (or not listed at all), keeps the wide mask.
// So the walk repeats, pinning each thread it has not pinned yet, until a
// walk finds none (at most pinPasses walks; a tree still changing after
// that is Pins' to fail).
func (s *Session) pinThreads() error {
	cores := s.Cores
	if len(cores) == 0 {
		return fmt.Errorf("pin threads: the visit's mask was not read as it started")
	}
	s.pinned = map[int]int{}
	for pass := 0; pass < pinPasses; pass++ {
		n, err := s.pinPass(cores)
		if err != nil || n == 0 {
			return err
		}
		if pinPassHook != nil {
			pinPassHook(pass)
		}
	}
	return nil
}

// pinPasses bounds pinThreads' walks.
const pinPasses = 8

// pinPassHook, set by a test, runs after each walk that pinned a thread.
var pinPassHook func(pass int)

// pinPass pins the visit's threads it has not pinned yet, the i-th of a
// process (ascending ids) on affinity.Spread(cores, i), and says how many
// it pinned.
func (s *Session) pinPass(cores []int) (int, error) {
	n := 0
	for _, pid := range s.pids() {
		for i, tid := range affinity.Threads(pid) {
			if _, done := s.pinned[tid]; done {
				continue
			}
			core := affinity.Spread(cores, i)
			if err := affinity.Pin(tid, core); err != nil {
				return n, fmt.Errorf("pin thread %d of process %d: %w", tid, pid, err)
			}
			s.pinned[tid] = core
			n++
		}
	}
	return n, nil
}

// pids is the visit's top process and every live process below it.
func (s *Session) pids() []int {
	pids := []int{s.cmd.Process.Pid}
	for _, p := range descendants(s.cmd.Process.Pid) {
		if !p.zombie {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// Pins reads back, after the timed samples, the mask of every thread of
// every process of the visit: each must still be on the one core the
// pinning gave it, and one made since on one core of the visit's mask.
// A thread that widened its mask, or moved, fails the visit
// (affinity_widened). Nil when nothing was pinned (the drive did not get
// as far, or the mask could not be read).
func (s *Session) Pins() ([]artifacts.ThreadPins, error) {
	if s.pinned == nil {
		return nil, nil
	}
	var out []artifacts.ThreadPins
	for _, pid := range s.pids() {
		p, _ := readProc(pid)
		rec := artifacts.ThreadPins{Comm: p.comm}
		for _, tid := range affinity.Threads(pid) {
			got, err := affinity.Of(tid)
			if err != nil {
				continue // the thread has ended
			}
			want, pinned := s.pinned[tid]
			switch {
			case pinned && !slices.Equal(got, []int{want}):
				return nil, fail("affinity_widened: a pinned thread left its core: thread %d (%s) of process %d on cores %s after the samples, pinned to %d", tid, p.comm, pid, affinity.List(got), want)
			case !pinned && (len(got) != 1 || !slices.Contains(s.Cores, got[0])):
				return nil, fail("affinity_widened: a thread made after the pinning is not on one core of the visit's: thread %d (%s) of process %d on cores %s, the visit's %s", tid, p.comm, pid, affinity.List(got), affinity.List(s.Cores))
			}
			rec.Cores = append(rec.Cores, got[0])
		}
		out = append(out, rec)
	}
	return out, nil
}
