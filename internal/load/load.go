// Package load measures what else a machine did while a visit ran
// (issue 12, quiet-machine evidence): the CPU time every process used, from
// /proc/stat, less the visit's own and replay's own, and the time the
// hypervisor took the CPUs away (steal).
package load

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// StatPath is the kernel's CPU accounting.
const StatPath = "/proc/stat"

// TickNs is one /proc/stat tick: USER_HZ is 100 on every Linux build
// tilepipe runs on (it is fixed by the kernel's ABI, not by HZ).
const TickNs = int64(time.Second / 100)

// MaxOtherCores is the other load a visit may overlap before it is
// flagged: a quarter of a core, on average over the visit, used by
// processes that are neither the visit's nor replay's.
const MaxOtherCores = 0.25

// Snapshot is the machine's CPU time and replay's own at one moment.
type Snapshot struct {
	BusyNs  int64 // all CPUs, every process: user, nice, system, irq, softirq
	StealNs int64 // all CPUs: time the hypervisor ran something else
	// SelfNs is replay's own: its process, every thread, and the helper
	// processes it runs beside the visits (the GPU telemetry monitor).
	SelfNs int64
}

// Read takes a snapshot from path (StatPath) and this process's usage,
// with the CPU time of replay's helper processes (pids) counted as its
// own: they are replay's bookkeeping, not the machine's other load (on
// the H200, the NVML monitor's readings alone were 0.3 cores of "other"
// load, enough to flag every GPU visit).
func Read(path string, helpers ...int) (Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Snapshot{}, err
	}
	s, err := parse(b)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s: %w", path, err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Snapshot{}, err
	}
	s.SelfNs = ru.Utime.Nano() + ru.Stime.Nano()
	for _, pid := range helpers {
		ns, err := processCPU(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return Snapshot{}, err
		}
		s.SelfNs += ns
	}
	return s, nil
}

// processCPU is a process's user and system time so far, from its
// /proc/PID/stat (fields 14 and 15, in ticks).
func processCPU(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", path)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields after the command name, want at least 13", path, len(f))
	}
	var ticks int64
	for _, x := range f[11:13] { // utime, stime: fields 14 and 15 of the line
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: CPU time %q: want a tick count", path, x)
		}
		ticks += n
	}
	return ticks * TickNs, nil
}

// parse reads the aggregate "cpu" line: user nice system idle iowait irq
// softirq steal (guest time is inside user already).
func parse(b []byte) (Snapshot, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return Snapshot{}, fmt.Errorf("first line %q: want \"cpu\" and at least 8 tick counts", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil || n < 0 {
			return Snapshot{}, fmt.Errorf("first line %q: field %d %q: want a tick count", line, i+1, f[i+1])
		}
		v[i] = n
	}
	user, nice, system, irq, softirq, steal := v[0], v[1], v[2], v[5], v[6], v[7]
	return Snapshot{BusyNs: (user + nice + system + irq + softirq) * TickNs, StealNs: steal * TickNs}, nil
}

// Other is what the machine did besides the visit and replay between two
// snapshots: other processes' CPU time (never below 0: /proc/stat counts
// in ticks, the visit's time in nanoseconds) and steal.
func Other(before, after Snapshot, visitCPUNs int64) (otherNs, stealNs int64) {
	otherNs = (after.BusyNs - before.BusyNs) - visitCPUNs - (after.SelfNs - before.SelfNs)
	return max(otherNs, 0), max(after.StealNs-before.StealNs, 0)
}

// Loaded says whether a visit of wallNs overlapped more than MaxOtherCores
// of other load, or as much steal.
func Loaded(otherNs, stealNs, wallNs int64) bool {
	if wallNs <= 0 {
		return false
	}
	return float64(otherNs+stealNs) > MaxOtherCores*float64(wallNs)
}
