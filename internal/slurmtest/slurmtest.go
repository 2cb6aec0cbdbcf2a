// Package slurmtest starts a real single-node Slurm for tests and for
// evidence runs (internal/tools/minislurm): a munge key
// and munged, a slurm.conf for this machine (its hostname, cores and
// memory, from slurmd -C) in a temporary directory, slurmctld and slurmd,
// all in the foreground as the test's children, stopped when it ends. No
// systemd, no accounting database (sacct is off; scontrol answers).
package slurmtest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/internal/slurm"
)

// Cluster is a running single-node Slurm.
type Cluster struct {
	Dir   string // its configuration, state and logs
	Conf  string // slurm.conf: every Slurm command needs SLURM_CONF set to it
	procs []*exec.Cmd
}

// Tools are the programs a cluster needs (Debian's slurm-wlm and munge).
var Tools = []string{"munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo"}

// Start starts a cluster for the test, sets SLURM_CONF for it and stops
// it when the test ends; or fails the test (skips it where Slurm is not
// installed and TILEPIPE_REQUIRE_ROUTES is not 1: make test requires it,
// and the Makefile installs slurm-wlm and munge).
func Start(t *testing.T) *Cluster {
	t.Helper()
	for _, p := range Tools {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
				t.Fatalf("slurm: %s not found (make deps installs slurm-wlm and munge): %v", p, err)
			}
			t.Skipf("slurm: %s not found (make deps installs slurm-wlm and munge)", p)
		}
	}
	if os.Geteuid() != 0 {
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
			t.Fatal("slurm: slurmd runs jobs as their users, so it needs root, and make test requires the Slurm tests")
		}
		t.Skip("slurm: slurmd runs jobs as their users, so it needs root")
	}
	OneWordTemp(t)
	c, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(30))
		}
		c.Stop()
	})
	t.Setenv("SLURM_CONF", c.Conf)
	return c
}

// OneWordTemp gives the test a TMPDIR that Slurm can name: its own
// directory under /tmp when the user's TMPDIR is not one word (a space,
// say), which slurm.conf and #SBATCH lines cannot hold (tilepipe slurm
// submit refuses such a job directory, and the test would test only
// that). Where TMPDIR is one word already it is kept.
func OneWordTemp(t *testing.T) {
	t.Helper()
	if slurm.Word(os.TempDir()) {
		return
	}
	dir, err := os.MkdirTemp("/tmp", "tilepipe-test-")
	if err != nil {
		t.Fatalf("slurm: TMPDIR %q is not one word, and /tmp has no room for one: %v", os.TempDir(), err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("TMPDIR", dir)
}

// Launch starts munged, slurmctld and slurmd in the foreground as this
// process's children, from a new temporary directory, and waits for the
// node to be idle. Stop stops them.
func Launch() (*Cluster, error) {
	if !slurm.Word(os.TempDir()) {
		return nil, fmt.Errorf("slurm: TMPDIR %q: slurm.conf names its paths unquoted, so the cluster's directory must be one word of letters, digits and _.:,=/@%%+- (set TMPDIR to one)", os.TempDir())
	}
	dir, err := os.MkdirTemp("", "tilepipe-slurm-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
	if err := c.launch(); err != nil {
		out := c.Logs(30)
		c.Stop()
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return c, nil
}

// slurmConf: the cluster's slurm.conf; its arguments are the host, munge's
// socket, the cluster's directory, slurmctld's and slurmd's ports and
// slurmd -C's node line.
const slurmConf = `# written by internal/slurmtest: a single-node Slurm for this machine
ClusterName=tilepipe-test
SlurmctldHost=%[1]s
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[2]s
CredType=cred/munge
StateSaveLocation=%[3]s/state
SlurmdSpoolDir=%[3]s/spool
SlurmctldPidFile=%[3]s/slurmctld.pid
SlurmdPidFile=%[3]s/slurmd.pid
SlurmctldLogFile=%[3]s/log/slurmctld.log
SlurmdLogFile=%[3]s/log/slurmd.log
SlurmctldPort=%[4]d
SlurmdPort=%[5]d
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=10
%[6]s State=UNKNOWN
PartitionName=debug Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`

// startMunge starts munged with a fresh key in c.Dir/munge: its socket.
func (c *Cluster) startMunge() (string, error) {
	dir := c.Dir
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return "", err
	}
	sock := filepath.Join(dir, "munge", "munge.sock")
	if err := c.start("munged", "-F", "--force", "--socket="+sock, "--key-file="+keyFile, "--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--seed-file="+filepath.Join(dir, "munge", "seed")); err != nil {
		return "", err
	}
	if err := waitFor("munged's socket", func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		return "", err
	}
	return sock, nil
}

func (c *Cluster) launch() error {
	dir := c.Dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"munge", "state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "munge"), 0o711); err != nil { // munged wants its socket's directory searchable
		return err
	}
	sock, err := c.startMunge()
	if err != nil {
		return err
	}
	node, err := exec.Command("slurmd", "-C").Output()
	if err != nil {
		return fmt.Errorf("slurm: slurmd -C: %v", err)
	}
	nodeLine := strings.SplitN(strings.TrimSpace(string(node)), "\n", 2)[0] // NodeName=... CPUs=... RealMemory=...
	host := strings.TrimPrefix(strings.Fields(nodeLine)[0], "NodeName=")
	ports := [2]int{}
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(slurmConf, host, sock, dir, ports[0], ports[1], nodeLine)
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		return err
	}
	if err := c.start("slurmctld", "-D", "-f", c.Conf); err != nil {
		return err
	}
	if err := c.start("slurmd", "-D", "-f", c.Conf); err != nil {
		return err
	}
	return waitFor("the node to be idle", func() bool {
		cmd := exec.Command("sinfo", "-h", "-o", "%t")
		cmd.Env = c.Env()
		out, err := cmd.Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
}

// Env is this process's environment with SLURM_CONF set to the cluster's.
func (c *Cluster) Env() []string { return append(os.Environ(), "SLURM_CONF="+c.Conf) }

func (c *Cluster) start(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	out, err := os.Create(filepath.Join(c.Dir, "log", name+".out"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("slurm: start %s: %v", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// Stop cancels every job and stops the daemons, then removes the
// directory.
func (c *Cluster) Stop() {
	cancel := exec.Command("scancel", "--full", "--user", "root")
	cancel.Env = c.Env()
	cancel.Run()
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(c.Dir)
}

// Logs is the last n lines of slurmctld's and slurmd's logs.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, l := range []string{"slurmctld.log", "slurmd.log"} {
		if out, err := os.ReadFile(filepath.Join(c.Dir, "log", l)); err == nil {
			fmt.Fprintf(&b, "%s (last lines):\n%s\n", l, tail(out, n))
		}
	}
	return b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitFor(what string, ok func() bool) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ok() {
			return nil
		}
	}
	return fmt.Errorf("slurm: waited a minute for %s", what)
}

func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Wait polls until done says the work is over, or fails the test after
// limit, printing what squeue shows.
func Wait(t *testing.T, limit time.Duration, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if done() {
			return
		}
	}
	q, _ := exec.Command("squeue", "-a").CombinedOutput()
	t.Fatalf("slurm: %s did not happen in %s; squeue:\n%s", what, limit, q)
}

// Idle says whether Slurm has no job pending or running.
func Idle() bool {
	out, err := exec.Command("squeue", "-h", "-o", "%i").Output()
	return err == nil && strings.TrimSpace(string(out)) == ""
}
