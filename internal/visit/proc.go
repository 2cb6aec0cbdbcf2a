package visit

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type proc struct {
	zombie    bool
	pid, ppid int
	start     uint64 // clock ticks after boot
	cpu       uint64 // clock ticks: utime + stime + cutime + cstime
	comm      string
}

// userHZ is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const userHZ = 100

// readProc reads /proc/PID/stat; ok is false for a process that is gone.
// A zombie (exited, not yet reaped) is still there, with its CPU time.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	s := string(b)
	// comm is in parentheses and may itself hold ") ".
	l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if l < 0 || r < l {
		return proc{}, false
	}
	f := strings.Fields(s[r+1:])
	// After comm: state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime.
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	var cpu uint64
	for _, i := range []int{11, 12, 13, 14} {
		t, _ := strconv.ParseUint(f[i], 10, 64)
		cpu += t
	}
	return proc{zombie: f[0] == "Z", pid: pid, ppid: ppid, start: start, cpu: cpu, comm: s[l+1 : r]}, true
}

// descendants lists the processes below pid, zombies included, oldest
// first.
func descendants(pid int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]proc{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(n); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		for _, c := range children[p] {
			out = append(out, c)
			todo = append(todo, c.pid)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].start != out[j].start {
			return out[i].start < out[j].start
		}
		return out[i].pid < out[j].pid
	})
	return out
}

// treeCPU is the CPU time of pid and every process below it (a zombie keeps
// its own; a reaped one is in its reaper's), each
// with what it has reaped: the whole of a sandbox, whose init reaps every
// orphan of the visit.
func treeCPU(pid int) time.Duration {
	var ticks uint64
	if p, ok := readProc(pid); ok {
		ticks += p.cpu
	}
	for _, p := range descendants(pid) {
		ticks += p.cpu
	}
	return time.Duration(ticks) * time.Second / userHZ
}

func comms(ps []proc) string {
	var names []string
	for i, p := range ps {
		if i == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, p.comm)
	}
	return strings.Join(names, ", ")
}

// Leftover names a visit's top process the way replay records it while the
// visit runs (a file in its work directory), so that a replay resumed after
// a kill can end what the killed one left running.
type Leftover struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // clock ticks after boot: tells a reused PID apart
}

// Leftover is this visit's top process (also the leader of its process
// group).
func (s *Session) Leftover() Leftover {
	p, _ := readProc(s.cmd.Process.Pid)
	return Leftover{PID: s.cmd.Process.Pid, Start: p.start}
}

// Stop kills l's process group if its leader is still the process recorded,
// and waits up to grace for the group to be gone. It says whether it found
// anything to stop.
func (l Leftover) Stop(grace time.Duration) (bool, error) {
	if l.PID <= 1 {
		return false, nil
	}
	p, ok := readProc(l.PID)
	if !ok || p.start != l.Start || p.zombie {
		return false, nil // gone, or the PID now names another process
	}
	syscall.Kill(-l.PID, syscall.SIGKILL)
	syscall.Kill(l.PID, syscall.SIGKILL)
	for end := time.Now().Add(grace); ; time.Sleep(10 * time.Millisecond) {
		p, ok := readProc(l.PID)
		if (!ok || p.start != l.Start || p.zombie) && syscall.Kill(-l.PID, 0) != nil {
			return true, nil
		}
		if time.Now().After(end) {
			return true, fmt.Errorf("process %d (%s) of an earlier visit still running %s after SIGKILL", l.PID, p.comm, grace)
		}
	}
}
