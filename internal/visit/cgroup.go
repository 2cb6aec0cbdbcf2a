package visit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limiter puts each visit in a cgroup of its own whose CFS quota is the
// visit's threads × CPUFactor CPUs: a visit cannot take more of the machine
// than its case's threads allow, and one that tries is throttled, which
// [Session.Finish] names (threads_exceeded).
type Limiter struct {
	base string // the directory the visits' cgroups are made in
	v2   bool   // cgroup2 (cpu.max) rather than the v1 cpu hierarchy
	// freezer is where v1 visits get their freezer cgroup ("" on v2,
	// whose cgroups freeze themselves, or where v1 has no freezer).
	freezer string
	// noQuota: cgroup2 whose cpu controller this process may not use
	// (the H200 host's: cpu.max cannot be opened), so the visits' cgroups
	// freeze and hold every process but set no CPU quota; the CPU time
	// accounting alone bounds a visit's threads.
	noQuota bool
}

// Describe says what limits a visit, for the replay's record.
func (l *Limiter) Describe() string {
	if l == nil {
		return ""
	}
	v := "v1 cpu.cfs_quota_us"
	if l.v2 {
		v = "v2 cpu.max"
	}
	d := fmt.Sprintf("cgroup %s under %s: threads x %g CPUs per visit", v, l.base, CPUFactor)
	if l.noQuota {
		d = fmt.Sprintf("cgroup v2 under %s without a CPU quota (its cpu controller is not ours to use): CPU time accounted", l.base)
	}
	switch {
	case l.v2:
		d += "; frozen by cgroup.freeze"
	case l.freezer != "":
		d += "; frozen by the v1 freezer under " + l.freezer
	}
	return d
}

// CanFreeze says whether the visits' cgroups can be frozen ([Session.Freeze]).
func (l *Limiter) CanFreeze() bool { return l != nil && (l.v2 || l.freezer != "") }

// ProbeLimiter finds where this process may make cgroups with a CPU quota
// (the v1 cpu hierarchy, or cgroup2 with the cpu controller, at this
// process's own cgroup) and checks it by making and removing one.
func ProbeLimiter() (*Limiter, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	var tried []string
	if p, ok := own["cpu"]; ok {
		for _, mnt := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"} {
			l := &Limiter{base: filepath.Join(mnt, p)}
			if fp, ok := own["freezer"]; ok {
				l.freezer = filepath.Join("/sys/fs/cgroup/freezer", fp)
				if err := l.try(); err == nil {
					return l, nil
				}
				l.freezer = "" // a CPU quota without a freezer is still a quota
			}
			if err := l.try(); err == nil {
				return l, nil
			} else {
				tried = append(tried, err.Error())
			}
		}
	}
	if p, ok := own[""]; ok {
		l := &Limiter{base: filepath.Join("/sys/fs/cgroup", p), v2: true}
		if err := l.try(); err == nil {
			return l, nil
		} else {
			tried = append(tried, err.Error())
		}
		// Without the cpu controller a cgroup still freezes, holds and
		// kills every process of a visit (cgroup.freeze is core).
		l.noQuota = true
		if err := l.try(); err == nil {
			return l, nil
		} else {
			tried = append(tried, err.Error())
		}
	}
	if len(tried) == 0 {
		return nil, errors.New("no cpu cgroup hierarchy in /proc/self/cgroup")
	}
	return nil, errors.New(strings.Join(tried, "; "))
}

// ownCgroups reads /proc/self/cgroup: controller -> path ("" for cgroup2).
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

func (l *Limiter) try() error {
	l.sweep()
	c, err := l.make("probe", 1)
	if err != nil {
		return err
	}
	return c.remove()
}

// staleAge is how old a cgroup left by a dead replay must be before
// sweep removes it.
const staleAge = time.Minute

// sweep removes the empty cgroups (a visit's, its freezer and its v1
// keeper) that replays killed before they could remove them left behind:
// named tilepipe-PID-..., PID no process here, untouched for staleAge. It
// only ever removes a directory (rmdir fails on a cgroup with a process
// in it) and never writes a cgroup's state, so a cgroup of a replay in
// another PID namespace that shares this hierarchy is at worst a keeper
// gone (its freezes dearer), never a visit thawed.
func (l *Limiter) sweep() {
	for _, root := range []string{l.base, l.freezer} {
		if root == "" {
			continue
		}
		ents, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range ents {
			pid, ok := staleOwner(e.Name())
			if !ok || !e.IsDir() || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
				continue
			}
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) >= staleAge {
				os.Remove(filepath.Join(root, e.Name()))
			}
		}
	}
}

// staleOwner is the replay PID in a cgroup name tilepipe-PID-NAME-SEQ.
func staleOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "tilepipe-")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	return pid, ok && err == nil && pid > 0
}

var cgroupSeq atomic.Int64

// cgroup is one visit's.
type cgroup struct {
	dir     string
	v2      bool
	freezer string // the v1 freezer cgroup ("" on v2 or without one)
	// keep is an empty v1 freezer cgroup, the visit's sibling, kept
	// FROZEN while the visit lives ("" where there is none; see make).
	keep    string
	noQuota bool // no CPU quota set ([Limiter] noQuota): never throttled
}

// make creates a cgroup limited to cpus CPUs.
func (l *Limiter) make(name string, cpus float64) (*cgroup, error) {
	dir := filepath.Join(l.base, fmt.Sprintf("tilepipe-%d-%s-%d", os.Getpid(), name, cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	c := &cgroup{dir: dir, v2: l.v2, noQuota: l.noQuota}
	if l.freezer != "" {
		fdir := filepath.Join(l.freezer, filepath.Base(dir))
		if err := os.Mkdir(fdir, 0o755); err != nil {
			c.remove()
			return nil, fmt.Errorf("cgroup %s: %w", fdir, err)
		}
		c.freezer = fdir
		// The v1 freezer turns a static key (freezer_active) on when a
		// cgroup starts freezing while none was, and off when the last one
		// thaws: each patches kernel text, about 100 us on this project's
		// VM, so a visit that froze and thawed alone paid 2 x 100 us in
		// every novel sample's span. An empty sibling kept FROZEN holds
		// the key on for the visit's life, and the visit's own freeze and
		// thaw cost 5-10 us (docs/results/2026-12-03-bracket).
		kdir := fdir + "-keep"
		if err := os.Mkdir(kdir, 0o755); err != nil {
			c.remove()
			return nil, fmt.Errorf("cgroup %s: %w", kdir, err)
		}
		c.keep = kdir
		if err := os.WriteFile(filepath.Join(kdir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
			c.remove()
			return nil, fmt.Errorf("cgroup %s: freezer.state: %w", kdir, err)
		}
	}
	const period = 100000 // µs
	quota := int64(cpus * period)
	var err error
	switch {
	case l.noQuota:
		// The freeze is what this cgroup is for; check it can.
		err = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0)
		if err != nil {
			c.remove()
			return nil, fmt.Errorf("cgroup %s: cgroup.freeze: %w", dir, err)
		}
		return c, nil
	case l.v2:
		err = os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(fmt.Sprintf("%d %d", quota, period)), 0)
	default:
		if err = os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(period)), 0); err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0)
		}
	}
	if err != nil {
		c.remove()
		return nil, fmt.Errorf("cgroup %s: set the CPU quota: %w", dir, err)
	}
	return c, nil
}

// wrap makes argv enter the cgroup before it runs: the shell puts itself
// in and execs argv, so every process argv starts is in it from the start.
func (c *cgroup) wrap(argv []string) []string {
	if c.freezer != "" {
		return append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, c.dir, c.freezer}, argv...)
	}
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.dir}, argv...)
}

// FreezeWait bounds how long a freeze may take before the visit fails.
const FreezeWait = 2 * time.Second

// freezeWait is FreezeWait, lowered by a test that needs a freeze to miss
// its deadline (no process found in user space holds a freeze off).
var freezeWait = FreezeWait

// freeze stops every process of the cgroup and returns once the kernel
// says all of them are frozen: a frozen task runs no instruction, so
// nothing of the visit (a thread, a helper process it forked) reads or
// writes memory until thaw.
func (c *cgroup) freeze() error {
	file, value, done := filepath.Join(c.freezer, "freezer.state"), "FROZEN", func(b []byte) bool { return strings.TrimSpace(string(b)) == "FROZEN" }
	events := file
	if c.v2 {
		file, value, events = filepath.Join(c.dir, "cgroup.freeze"), "1", filepath.Join(c.dir, "cgroup.events")
		done = func(b []byte) bool { return slices.Contains(strings.Split(string(b), "\n"), "frozen 1") }
	} else if c.freezer == "" {
		return errors.New("visit cgroup: no freezer")
	}
	write := func(v string) error {
		if err := os.WriteFile(file, []byte(v), 0); err != nil {
			return fmt.Errorf("freeze %s: %w", file, err)
		}
		return nil
	}
	if err := write(value); err != nil {
		return err
	}
	// Polled first with sched_yield (20 times), then with a sleep that
	// doubles from 10 us to 200 us, never with a plain spin: a spinning
	// replay holds a core that a visit thread pinned there must run on to
	// freeze, and the scheduler lets it in only after its wakeup
	// granularity (milliseconds: on 2 cores a spin made every freeze
	// 1-25 ms, docs/protocol.md). A yield hands that core to the visit's
	// thread at once; a freeze takes 5-10 us, and Go's sub-millisecond
	// sleeps often last 1 ms here (docs/results/2026-12-03-bracket).
	//
	// cgroup v1's freezer can stay FREEZING while the cgroup's processes
	// keep forking: one write walks the tasks present then, and a child
	// forked during the walk can be missed (runc's fs/freezer.go says the
	// same of kernels up to 5.4; this VM's 6.18 left a fork loop FREEZING
	// past 2 s in 1 of 15 tries under load). So v1 writes FROZEN again on
	// every poll, which walks the tasks again, and every 50 polls thaws
	// for 10 ms to let a fork in flight finish, as runc does. Nothing is
	// written to the slots before freeze returns, so a visit that runs
	// during those 10 ms sees only what it saw before the freeze. v2
	// freezes atomically and needs neither.
	nap := 10 * time.Microsecond
	for i, end := 1, time.Now().Add(freezeWait); ; i++ {
		b, err := os.ReadFile(events)
		if err != nil {
			return fmt.Errorf("freeze: %w", err)
		}
		if done(b) {
			return nil
		}
		if time.Now().After(end) {
			return fail("not_frozen: the visit's processes were not all frozen %v after replay froze its cgroup", freezeWait)
		}
		if i <= 20 {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		} else {
			time.Sleep(nap)
			nap = min(2*nap, 200*time.Microsecond)
		}
		if c.v2 {
			continue
		}
		if i%50 == 0 {
			if err := write("THAWED"); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := write(value); err != nil {
			return err
		}
	}
}

// thaw lets the cgroup's processes run again.
func (c *cgroup) thaw() error {
	file, value := filepath.Join(c.freezer, "freezer.state"), "THAWED"
	if c.v2 {
		file, value = filepath.Join(c.dir, "cgroup.freeze"), "0"
	} else if c.freezer == "" {
		return errors.New("visit cgroup: no freezer")
	}
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("thaw %s: %w", file, err)
	}
	return nil
}

// throttled is how many CFS periods the cgroup was throttled in.
func (c *cgroup) throttled() (int64, error) {
	if c.noQuota {
		return 0, nil
	}
	b, err := os.ReadFile(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nr_throttled" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s/cpu.stat: no nr_throttled", c.dir)
}

// procs lists the processes still in the cgroup.
func (c *cgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// left waits up to grace for the cgroup to empty by itself (a sandbox's
// processes die with it, a moment after bubblewrap), then kills every
// process still in it, however it left the visit's process group, and
// says how many there were.
func (c *cgroup) left(grace time.Duration) int {
	if c.v2 || c.freezer != "" {
		c.thaw() // frozen processes would neither exit nor die
	}
	for end := time.Now().Add(grace); len(c.procs()) > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	n := 0
	for i := 0; i < 50; i++ {
		ps := c.procs()
		if len(ps) == 0 {
			break
		}
		n = max(n, len(ps))
		for _, pid := range ps {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// remove removes the cgroup (and its freezer) once its processes are gone.
func (c *cgroup) remove() error {
	if c.freezer != "" {
		// A frozen cgroup's processes cannot die: thaw it first.
		c.thaw()
	}
	for _, dir := range []string{c.freezer, c.keep, c.dir} {
		if dir == "" {
			continue
		}
		var err error
		for i := 0; i < 50; i++ {
			if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
