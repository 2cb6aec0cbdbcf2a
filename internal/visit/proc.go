package visit

import (
	"os"
	"sort"
	"strconv"
	"strings"
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
