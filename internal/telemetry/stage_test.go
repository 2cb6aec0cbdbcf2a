package telemetry

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tilepipe/tilepipe/internal/fakecuda"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/prepare/harness"
)

// realMonitor builds the CUDA timer (prepare/harness) and returns the argv
// and environment of its --telemetry on the fake driver (internal/fakecuda:
// host memory posing as device memory), so the stager's own C runs here;
// extra goes into the monitor's environment.
func realMonitor(t *testing.T, extra ...string) ([]string, []string) {
	t.Helper()
	dir := t.TempDir()
	src, err := harness.WriteCUDA(dir, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "cuda-timer")
	if out, err := exec.Command("cc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-DTILEPIPE_CUDA", "-o", exe, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build the CUDA timer: %v\n%s", err, out)
	}
	return []string{exe, "--telemetry"}, fakecuda.Env(fakecuda.Lib(t), extra...)
}

// stageFiles are a visit's fresh-pool files as replay makes them: input A
// and output C, sets sets of bytes bytes each.
func stageFiles(t *testing.T, sets, bytes int) (a, c *visit.MemFile) {
	t.Helper()
	a, err := visit.NewNovelInput("A", visit.NewLayout(visit.PoolFresh, sets, bytes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	c, err = visit.NewOutput("C", visit.NewLayout(visit.PoolFresh, sets, bytes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return a, c
}

// fileBytes is a memory file's whole content.
func fileBytes(t *testing.T, m *visit.MemFile) []byte {
	t.Helper()
	b := make([]byte, m.Layout.Size())
	if n, err := unix.Pread(int(m.File.Fd()), b, 0); err != nil || n != len(b) {
		t.Fatalf("read %s: %d bytes, %v", m.Name, n, err)
	}
	return b
}

// mapStaged maps a staged allocation's descriptor as the timer does (here
// host memory: the fake driver's device memory).
func mapStaged(t *testing.T, s Staged) []byte {
	t.Helper()
	defer s.File.Close()
	b, err := unix.Mmap(int(s.File.Fd()), 0, int(s.Bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// TestMonitorStages drives the real monitor's stager through three novel
// samples: what it uploads is what replay wrote (gaps and canaries
// included, files in param order), what the visit's calls wrote comes
// back into the output file, and an input written or a canary of an
// output's gap overwritten on the device is named with the sample, the
// file and the byte, the output file's canaries restored.
func TestMonitorStages(t *testing.T) {
	argv, env := realMonitor(t)
	m, err := Start(argv, env)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const sets, n = 4, 3
	a, c := stageFiles(t, sets, 256)
	size, err := m.Open(sets, visit.FreshGap, []StageFile{{"A", oracle.RoleInput, 256, a.File}, {"C", oracle.RoleOutput, 256, c.File}})
	if err != nil || size != 2<<20 {
		t.Fatalf("Open = %d, %v; want the fake driver's granularity, 2 MiB", size, err)
	}
	cOff := a.Layout.Size() // C follows A in the allocation
	for i, tc := range []struct {
		name   string
		write  func(dev []byte) // what the visit's calls do on the device
		reason string
	}{
		{"honest", func(dev []byte) {}, ""},
		{"an input written", func(dev []byte) { dev[a.Layout.Offset(1)+7]++ },
			"input_written: A fresh byte 391 (device) (novel sample 1)"},
		{"a gap overwritten", func(dev []byte) { dev[cOff+c.Layout.Offset(2)-1] = 0 },
			"guard_overwritten: C fresh byte 703 (device) (novel sample 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := int64(10 + i)
			for s := range n {
				a.Write(s, bytes.Repeat([]byte{byte(16*i + s + 1)}, 256))
			}
			c.Fill([]byte{0xEE})
			st, err := m.Stage(seq, n, false)
			if err != nil {
				t.Fatal(err)
			}
			dev := mapStaged(t, st)
			end := a.Layout.Offset(n-1) + 256
			if !bytes.Equal(dev[:end], fileBytes(t, a)[:end]) || !bytes.Equal(dev[cOff:cOff+end], fileBytes(t, c)[:end]) {
				t.Fatal("the staged allocation is not the files' sets 0 to n-1, A then C")
			}
			for s := range n { // the calls' outputs
				copy(dev[cOff+c.Layout.Offset(s):], bytes.Repeat([]byte{byte(0x40 + s)}, 256))
			}
			tc.write(dev)
			if err := m.Probe(seq); err != nil || m.IdleNs <= 0 {
				t.Fatalf("Probe = %v, idle %d ns", err, m.IdleNs)
			}
			reason, err := m.Unstage(seq)
			if err != nil || reason != tc.reason {
				t.Fatalf("Unstage = %q, %v; want %q", reason, err, tc.reason)
			}
			for s := range n {
				if !bytes.Equal(c.Set(s), bytes.Repeat([]byte{byte(0x40 + s)}, 256)) {
					t.Errorf("output set %d did not come back into C's file", s)
				}
			}
			if err := c.CheckCanary(); err != nil {
				t.Errorf("C's canaries after unstaging: %v", err)
			}
		})
	}
	if err := m.CloseFiles(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read(); err != nil {
		t.Errorf("a reading after close: %v", err)
	}
}

// TestMonitorStageRefuses: requests out of order, or files that are not
// what open says, end the monitor naming why (replay then fails the
// visit with it and starts another monitor for the next).
func TestMonitorStageRefuses(t *testing.T) {
	argv, env := realMonitor(t)
	for _, tc := range []struct {
		name string
		run  func(m *Monitor, a, c *visit.MemFile) error
		want string
	}{
		{"stage before open", func(m *Monitor, a, c *visit.MemFile) error { _, err := m.Stage(1, 1, false); return err },
			"stage 1: no files open"},
		{"a file of another size", func(m *Monitor, a, c *visit.MemFile) error {
			_, err := m.Open(4, visit.FreshGap, []StageFile{{"A", oracle.RoleInput, 2048, a.File}})
			return err
		}, "open: A: not a memory file of 12288 bytes"},
		{"a descriptor short", func(m *Monitor, a, c *visit.MemFile) error {
			if _, err := m.ask("open 4 64 A input 256 C output 256", []*os.File{a.File}, 0); err != nil {
				return m.fail(err)
			}
			return nil
		}, "open: 2 files, 1 descriptors"},
		{"staged twice", func(m *Monitor, a, c *visit.MemFile) error {
			if err := openAndStage(m, a); err != nil {
				return err
			}
			_, err := m.Stage(2, 2, false)
			return err
		}, "stage 2: a sample is staged already"},
		{"more calls than sets", func(m *Monitor, a, c *visit.MemFile) error {
			if _, err := m.Open(4, visit.FreshGap, []StageFile{{"A", oracle.RoleInput, 256, a.File}}); err != nil {
				return err
			}
			_, err := m.Stage(1, 5, false)
			return err
		}, "stage 1: 5 calls, want 1 to 4 (the fresh sets)"},
		{"unstage another sample", func(m *Monitor, a, c *visit.MemFile) error {
			if err := openAndStage(m, a); err != nil {
				return err
			}
			return m.Probe(2)
		}, "unstage 2: another sample is staged"},
		{"more fields than a request holds", func(m *Monitor, a, c *visit.MemFile) error {
			if _, err := m.ask("open 4 64"+strings.Repeat(" A input 256", 65), nil, 0); err != nil {
				return m.fail(err)
			}
			return nil
		}, "request: more than 196 fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Start(argv, env)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			a, c := stageFiles(t, 4, 256)
			err = tc.run(m, a, c)
			if err == nil || !strings.Contains(err.Error(), "harness: error: "+tc.want) || m.Alive() {
				t.Errorf("err = %v, alive %v; want the monitor ended naming %q", err, m.Alive(), tc.want)
			}
		})
	}
}

// openAndStage opens file a (4 sets of 256 bytes) and stages sample 1 of
// 2 calls, closing the allocation's descriptor.
func openAndStage(m *Monitor, a *visit.MemFile) error {
	if _, err := m.Open(4, visit.FreshGap, []StageFile{{"A", oracle.RoleInput, 256, a.File}}); err != nil {
		return err
	}
	st, err := m.Stage(1, 2, false)
	if err != nil {
		return err
	}
	return st.File.Close()
}

// TestMonitorFirstLine: the real monitor says which policy its probes run
// under, and a reading carries the probe's CPU wait.
func TestMonitorFirstLine(t *testing.T) {
	argv, env := realMonitor(t)
	m, err := Start(argv, env)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if s := m.Device.Sched; s != "fifo" && !strings.HasPrefix(s, "other (sched_setscheduler SCHED_FIFO: ") {
		t.Errorf("sched = %q, want fifo or other naming why", s)
	}
	if _, err := m.Read(); err != nil || m.IdleWaitNs < -1 {
		t.Errorf("Read = %v, idle wait %d ns", err, m.IdleWaitNs)
	}
}
