package visit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Limiter puts each visit in a cgroup of its own whose CFS quota is the
// visit's threads × CPUFactor CPUs: a visit cannot take more of the machine
// than its case's threads allow, and one that tries is throttled, which
// [Session.Finish] names (threads_exceeded).
type Limiter struct {
	base string // the directory the visits' cgroups are made in
	v2   bool   // cgroup2 (cpu.max) rather than the v1 cpu hierarchy
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
	return fmt.Sprintf("cgroup %s under %s: threads x %g CPUs per visit", v, l.base, CPUFactor)
}

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
	c, err := l.make("probe", 1)
	if err != nil {
		return err
	}
	return c.remove()
}

var cgroupSeq atomic.Int64

// cgroup is one visit's.
type cgroup struct {
	dir string
	v2  bool
}

// make creates a cgroup limited to cpus CPUs.
func (l *Limiter) make(name string, cpus float64) (*cgroup, error) {
	dir := filepath.Join(l.base, fmt.Sprintf("tilepipe-%d-%s-%d", os.Getpid(), name, cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	c := &cgroup{dir: dir, v2: l.v2}
	const period = 100000 // µs
	quota := int64(cpus * period)
	var err error
	if l.v2 {
		err = os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(fmt.Sprintf("%d %d", quota, period)), 0)
	} else {
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
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.dir}, argv...)
}

// throttled is how many CFS periods the cgroup was throttled in.
func (c *cgroup) throttled() (int64, error) {
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

// remove removes the cgroup once its processes are gone.
func (c *cgroup) remove() error {
	var err error
	for i := 0; i < 50; i++ {
		if err = os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
