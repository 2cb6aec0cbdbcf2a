// Package slurmtest starts a real single-node Slurm for tests: a munge key
// and munged, a slurm.conf for this machine (its hostname, cores and
// memory, from slurmd -C) in a temporary directory, slurmctld and slurmd,
// all in the foreground as the test's children, stopped when it ends. No
// systemd, no accounting database (sacct is off; scontrol answers).
package slurmtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Cluster is a running single-node Slurm.
type Cluster struct {
	Dir  string // its configuration, state and logs
	Conf string // slurm.conf; SLURM_CONF is set to it for the test
}

// Start starts the cluster, or fails the test (skips it when Slurm is not
// installed and TILEPIPE_REQUIRE_ROUTES is not 1: make test requires it,
// and the Makefile installs slurm-wlm and munge).
func Start(t *testing.T) *Cluster {
	t.Helper()
	for _, p := range []string{"munged", "slurmctld", "slurmd", "sbatch", "scontrol"} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
				t.Fatalf("slurm: %s not found (make deps installs slurm-wlm and munge): %v", p, err)
			}
			t.Skipf("slurm: %s not found (make deps installs slurm-wlm and munge)", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("slurm: slurmd runs jobs as their users, so it needs root")
	}
	dir, err := os.MkdirTemp("", "tilepipe-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
	for _, d := range []string{"munge", "state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "munge"), 0o711) // munged wants its socket's directory searchable
	key := make([]byte, 1024)
	if f, err := os.Open("/dev/urandom"); err == nil {
		f.Read(key)
		f.Close()
	}
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge", "munge.sock")
	var procs []*exec.Cmd
	stop := func() {
		exec.Command("scancel", "--full", "--user", "root").Run()
		for i := len(procs) - 1; i >= 0; i-- {
			p := procs[i]
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
		if t.Failed() {
			for _, l := range []string{"slurmctld.log", "slurmd.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, "log", l)); err == nil {
					t.Logf("%s (last lines):\n%s", l, tail(b, 30))
				}
			}
		}
		os.RemoveAll(dir)
	}
	t.Cleanup(stop)
	start := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
		out, err := os.Create(filepath.Join(dir, "log", name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("slurm: start %s: %v", name, err)
		}
		procs = append(procs, cmd)
	}
	start("munged", "-F", "--force", "--socket="+sock, "--key-file="+keyFile, "--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--seed-file="+filepath.Join(dir, "munge", "seed"))
	waitFor(t, "munged's socket", func() bool { _, err := os.Stat(sock); return err == nil })

	node, err := exec.Command("slurmd", "-C").Output()
	if err != nil {
		t.Fatalf("slurm: slurmd -C: %v", err)
	}
	nodeLine := strings.SplitN(strings.TrimSpace(string(node)), "\n", 2)[0] // NodeName=... CPUs=... RealMemory=...
	host := strings.TrimPrefix(strings.Fields(nodeLine)[0], "NodeName=")
	conf := fmt.Sprintf(`# written by internal/slurmtest for one test
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
`, host, sock, dir, freePort(t), freePort(t), nodeLine)
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_CONF", c.Conf)
	start("slurmctld", "-D", "-f", c.Conf)
	start("slurmd", "-D", "-f", c.Conf)
	waitFor(t, "the node to be idle", func() bool {
		out, err := exec.Command("sinfo", "-h", "-o", "%t").Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("slurm: waited a minute for %s", what)
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
func (c *Cluster) Wait(t *testing.T, limit time.Duration, what string, done func() bool) {
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
