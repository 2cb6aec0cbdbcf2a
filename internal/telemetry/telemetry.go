// Package telemetry drives replay's GPU monitor: the prepared CUDA
// timer's --telemetry, tilepipe's own code checked by digest, in a
// process of its own outside every visit, so no kernel shares its address
// space or can answer for it (docs/gpu.md, "Telemetry"). It reads the
// GPU's state around every GPU sample with an idle probe, and it stages
// each novel sample's slots on the device: one fresh allocation per
// sample, uploaded while the visit is frozen and checked after it
// (docs/gpu-clock.md, "The stager").
package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// Timeout bounds the monitor's first line and each reading.
const Timeout = 30 * time.Second

// maxLine bounds a line the monitor writes.
const maxLine = 4096

// Device is the monitor's first line: what it reads.
type Device struct {
	Telemetry string `json:"telemetry"` // samples.TelemetryNVML
	Device    string `json:"device"`
	Bus       string `json:"bus"`
	Driver    string `json:"driver"`
	// Sched is the scheduling policy of the monitor's idle probes:
	// "fifo", or "other (why not)" where it may not use SCHED_FIFO.
	Sched string `json:"sched"`
}

func (d Device) String() string {
	s := fmt.Sprintf("%s: %s at %s, driver %s", d.Telemetry, d.Device, d.Bus, d.Driver)
	if d.Sched != "" {
		s += ", probes " + d.Sched
	}
	return s
}

// Monitor is a running telemetry process. Its fd 0 and fd 1 are one Unix
// stream socket, conn the other end: a request or an answer may carry
// descriptors.
type Monitor struct {
	cmd    *exec.Cmd
	conn   *net.UnixConn
	buf    []byte // read past the last line
	fds    []int  // descriptors that came with buf's bytes
	stderr bytes.Buffer
	Device Device
	// IdleNs is the last idle probe: ns from a launch of the monitor's
	// empty kernel to its end; IdleWaitNs the time the probe's thread
	// waited for a CPU meanwhile (-1: unknown).
	IdleNs, IdleWaitNs int64
}

// Start runs argv (the CUDA timer and "--telemetry") with env and reads
// its first line.
func Start(argv, env []string) (*Monitor, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	child, ours := os.NewFile(uintptr(pair[0]), "monitor"), os.NewFile(uintptr(pair[1]), "replay")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		child.Close()
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	m := &Monitor{conn: c.(*net.UnixConn)}
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Env, m.cmd.Stdin, m.cmd.Stdout, m.cmd.Stderr = env, child, child, &m.stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close ends what it started too
	m.cmd.WaitDelay = time.Second
	err = m.cmd.Start()
	child.Close()
	if err != nil {
		m.conn.Close()
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	line, err := m.line(0)
	if err == nil {
		err = strict(line, &m.Device)
		if err == nil && (m.Device.Telemetry != samples.TelemetryNVML || m.Device.Device == "") {
			err = fmt.Errorf("first line %q: want the device it reads, from %q", line, samples.TelemetryNVML)
		}
		// A monitor made before novel rule 3 says no sched and cannot
		// stage: its prepared stage is older than this replay.
		if err == nil && m.Device.Sched == "" {
			err = fmt.Errorf("first line %q: no \"sched\": a monitor from before novel rule 3, which cannot stage GPU novel samples (prepare the capture again)", line)
		}
	}
	if err != nil {
		return nil, m.fail(err)
	}
	return m, nil
}

// wire is a reading as the monitor writes it.
type wire struct {
	SMMHz              *int64 `json:"sm_mhz"`
	MemMHz             *int64 `json:"mem_mhz"`
	TempC              *int64 `json:"temp_c"`
	PowerMW            *int64 `json:"power_mw"`
	Reasons            *int64 `json:"reasons"`
	Procs              *int64 `json:"procs"`
	PowerViolationNs   *int64 `json:"power_violation_ns"`
	ThermalViolationNs *int64 `json:"thermal_violation_ns"`
	IdleNs             *int64 `json:"idle_ns"`
	IdleWaitNs         *int64 `json:"idle_wait_ns"`
}

// BusyNs is the idle probe's limit: a launch of the monitor's empty kernel
// that takes longer found the GPU running another process's work. On the
// H200 (docs/results/2026-12-04-gpu-clock-probe) it takes 8-58 us on an
// idle GPU, up to 294 us just after another context ran a kernel (the
// switch between contexts), 188-322 us at worst in each honest visit, and
// 2351-2419 us beside another process's kernels queued back to back,
// whatever their length or grid (the GPU's time slice). Work of shorter
// kernels with host gaps between them can go unseen, and so can a stream
// that waits on a device flag (queue-probe.txt): the probe sees kernels
// that run, not work that waits (docs/gpu-clock.md).
const BusyNs = 500_000

// Read asks for one reading, with the idle probe (IdleNs). An error ends
// the monitor.
func (m *Monitor) Read() (samples.Reading, error) {
	line, err := m.ask("r", nil, 0)
	if err != nil {
		return samples.Reading{}, m.fail(err)
	}
	var w wire
	if err := strict(line, &w); err != nil {
		return samples.Reading{}, m.fail(err)
	}
	vals := []*int64{w.SMMHz, w.MemMHz, w.TempC, w.PowerMW, w.Reasons, w.Procs, w.PowerViolationNs, w.ThermalViolationNs, w.IdleNs}
	for _, v := range vals {
		if v == nil || *v < -1 {
			return samples.Reading{}, m.fail(fmt.Errorf("reading %q: want every value, each -1 (unsupported) or more", line))
		}
	}
	if err := m.probed(line, w.IdleNs, w.IdleWaitNs); err != nil {
		return samples.Reading{}, err
	}
	r := samples.Reading{SMMHz: *w.SMMHz, MemMHz: *w.MemMHz, TempC: *w.TempC, PowerMW: *w.PowerMW, Reasons: *w.Reasons,
		Procs: *w.Procs, PowerViolationNs: *w.PowerViolationNs, ThermalViolationNs: *w.ThermalViolationNs}
	if why := r.Implausible(); why != "" {
		return samples.Reading{}, m.fail(fmt.Errorf("reading %q: %s", line, why))
	}
	return r, nil
}

// probed keeps an answer's idle probe (IdleNs, IdleWaitNs); the wait may
// be absent (a monitor that cannot tell: -1).
func (m *Monitor) probed(line []byte, idle, wait *int64) error {
	if idle == nil || *idle <= 0 {
		return m.fail(fmt.Errorf("reading %q: idle_ns %s: want the idle probe's time", line, orNone(idle)))
	}
	m.IdleNs, m.IdleWaitNs = *idle, -1
	if wait != nil {
		if *wait < -1 {
			return m.fail(fmt.Errorf("reading %q: idle_wait_ns %d: want -1 (unknown) or more", line, *wait))
		}
		m.IdleWaitNs = *wait
	}
	return nil
}

func orNone(v *int64) string {
	if v == nil {
		return "absent"
	}
	return strconv.FormatInt(*v, 10)
}

// ask sends one request line carrying files' descriptors and reads the
// answer, which must carry want descriptors (0 or 1); a descriptor that
// came is left in m.fds for take.
func (m *Monitor) ask(req string, files []*os.File, want int) ([]byte, error) {
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	if err := m.conn.SetWriteDeadline(time.Now().Add(Timeout)); err != nil {
		return nil, err
	}
	if _, _, err := m.conn.WriteMsgUnix([]byte(req+"\n"), oob, nil); err != nil {
		return nil, err
	}
	return m.line(want)
}

// line reads one line within Timeout; it must have come with want
// descriptors (0 or 1).
func (m *Monitor) line(want int) ([]byte, error) {
	if err := m.conn.SetReadDeadline(time.Now().Add(Timeout)); err != nil {
		return nil, err
	}
	for {
		if i := bytes.IndexByte(m.buf, '\n'); i >= 0 {
			line := bytes.Clone(m.buf[:i])
			m.buf = m.buf[i+1:]
			if len(m.fds) != want {
				return nil, fmt.Errorf("answer %q came with %d descriptors, want %d", line, len(m.fds), want)
			}
			return line, nil
		}
		if len(m.buf) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		b, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4*4))
		n, oobn, flags, _, err := m.conn.ReadMsgUnix(b, oob)
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			for _, msg := range msgs {
				if fds, err := unix.ParseUnixRights(&msg); err == nil {
					m.fds = append(m.fds, fds...)
				} else if perr == nil {
					perr = err
				}
			}
			if perr == nil && flags&unix.MSG_CTRUNC != 0 {
				perr = errors.New("descriptors cut off")
			}
			if perr != nil {
				return nil, fmt.Errorf("an answer's descriptors: %v", perr)
			}
		}
		m.buf = append(m.buf, b[:n]...)
		switch {
		case err != nil && os.IsTimeout(err):
			return nil, fmt.Errorf("no answer in %v", Timeout)
		case n == 0 && (err == nil || errors.Is(err, io.EOF)), errors.Is(err, net.ErrClosed):
			return nil, fmt.Errorf("exited")
		case err != nil:
			return nil, err
		}
	}
}

// take is the descriptor the last answer carried, as a file.
func (m *Monitor) take(name string) *os.File {
	fd := m.fds[0]
	m.fds = m.fds[1:]
	return os.NewFile(uintptr(fd), name)
}

// fail ends the monitor and names why, with its exit and stderr.
func (m *Monitor) fail(err error) error {
	if m.cmd.ProcessState == nil && err.Error() != "exited" {
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	}
	m.Close()
	msg := strings.TrimSpace(m.stderr.String())
	if len(msg) > 300 {
		msg = msg[len(msg)-300:]
	}
	if msg != "" {
		return fmt.Errorf("telemetry: %v (%s; stderr: %s)", err, m.cmd.ProcessState, msg)
	}
	return fmt.Errorf("telemetry: %v", err)
}

// Alive says whether the monitor still runs (an error ends it).
func (m *Monitor) Alive() bool { return m.cmd.ProcessState == nil }

// Idle reads the GPU (Read) and fails a probe that found it busy
// (Busy): the reading before a sample's command or after its report,
// when no work of the visit may run. The visit's record g counts the
// probes and keeps the slowest. The monitor keeps running.
func (m *Monitor) Idle(g *Probes) (samples.Reading, error) {
	r, err := m.Read()
	if err != nil {
		return r, err
	}
	return r, g.Add(m.IdleNs, m.IdleWaitNs)
}

// Probes is a visit's record of idle probes (artifacts.GPUIdle's fields).
type Probes struct {
	N               int
	WorstNs, WaitNs int64 // the slowest probe, and its thread's CPU wait (-1: unknown)
	WorstWaitNs     int64 // the longest CPU wait of any probe
}

// Add counts one probe of idle ns, its thread having waited wait ns for a
// CPU, and fails it when it found the GPU busy (BusyNs), naming the wait:
// a probe the host's CPUs delayed says so, and still fails, since a
// route that kept the monitor off its CPU must not pass a busy GPU as
// idle.
func (g *Probes) Add(idle, wait int64) error {
	g.N++
	if idle > g.WorstNs {
		g.WorstNs, g.WaitNs = idle, wait
	}
	g.WorstWaitNs = max(g.WorstWaitNs, wait)
	if idle > BusyNs {
		waited := "its CPU wait unknown"
		if wait >= 0 {
			waited = fmt.Sprintf("%d us of it waiting for a CPU", wait/1000)
		}
		return fmt.Errorf("gpu_busy: replay's empty kernel took %d us on the GPU around a sample (idle, under %d us; %s): GPU work of the visit ran outside its samples", idle/1000, BusyNs/1000, waited)
	}
	return nil
}

// StageFile is one of a visit's fresh-pool memory files, as Open hands
// it to the monitor: the param's name and role (oracle.RoleInput or
// RoleOutput), its bytes per set, the file.
type StageFile struct {
	Name, Role string
	Bytes      int64
	File       *os.File
}

// Open hands the monitor a visit's fresh-pool memory files, in param
// order (the visit file's): sets sets apart by gap (visit.FreshGap). It
// returns the size of each staged allocation.
func (m *Monitor) Open(sets, gap int, files []StageFile) (int64, error) {
	req := fmt.Sprintf("open %d %d", sets, gap)
	var fs []*os.File
	for _, f := range files {
		req += fmt.Sprintf(" %s %s %d", f.Name, f.Role, f.Bytes)
		fs = append(fs, f.File)
	}
	line, err := m.ask(req, fs, 0)
	if err != nil {
		return 0, m.fail(err)
	}
	var a struct {
		Opened *int64 `json:"opened"`
	}
	if err := strict(line, &a); err != nil || a.Opened == nil || *a.Opened <= 0 {
		return 0, m.fail(fmt.Errorf("answer %q to open: want {\"opened\": BYTES}", line))
	}
	return *a.Opened, nil
}

// Staged is a novel sample's slots on the device: the allocation's
// descriptor (replay hands it to the visit with the command and closes
// its copy), its size and the upload's time (a diagnostic, never a
// sample's).
type Staged struct {
	File     *os.File
	Bytes    int64
	UploadNs int64
}

// Stage makes sample seq's slots: one fresh allocation holding the open
// files with sets 0 to n-1 as they are now uploaded (and under flush the
// L2 written over after the upload).
func (m *Monitor) Stage(seq, n int64, flush bool) (Staged, error) {
	f := 0
	if flush {
		f = 1
	}
	line, err := m.ask(fmt.Sprintf("stage %d %d %d", seq, n, f), nil, 1)
	if err != nil {
		return Staged{}, m.fail(err)
	}
	file := m.take("staged slots")
	var a struct {
		Staged   *int64 `json:"staged"`
		Bytes    *int64 `json:"bytes"`
		UploadNs *int64 `json:"upload_ns"`
	}
	if err := strict(line, &a); err != nil || a.Staged == nil || *a.Staged != seq || a.Bytes == nil || a.UploadNs == nil {
		file.Close()
		return Staged{}, m.fail(fmt.Errorf("answer %q to stage %d: want {\"staged\": %d, \"bytes\": B, \"upload_ns\": U}", line, seq, seq))
	}
	return Staged{File: file, Bytes: *a.Bytes, UploadNs: *a.UploadNs}, nil
}

// Probe is the first half of unstaging sample seq: the idle probe, taken
// at once (IdleNs, IdleWaitNs), before anything comes down. Replay ends
// the sample's span with it, so GPU work the visit left running when it
// answered is inside the span (or, past BusyNs, fails the visit).
func (m *Monitor) Probe(seq int64) error {
	line, err := m.ask(fmt.Sprintf("unstage %d", seq), nil, 0)
	if err != nil {
		return m.fail(err)
	}
	var a struct {
		Probed     *int64 `json:"probed"`
		IdleNs     *int64 `json:"idle_ns"`
		IdleWaitNs *int64 `json:"idle_wait_ns"`
	}
	if err := strict(line, &a); err != nil || a.Probed == nil || *a.Probed != seq {
		return m.fail(fmt.Errorf("answer %q to unstage %d: want {\"probed\": %d, \"idle_ns\": N, \"idle_wait_ns\": W}", line, seq, seq))
	}
	return m.probed(line, a.IdleNs, a.IdleWaitNs)
}

// Unstage is the second half: every file's range has come down and been
// checked, the outputs are in their memory files, the allocation is
// released. It returns the first violation the monitor found, as a
// visit's failure reason ("" for none: input_written, guard_overwritten).
func (m *Monitor) Unstage(seq int64) (string, error) {
	line, err := m.line(0)
	if err != nil {
		return "", m.fail(err)
	}
	var a struct {
		Unstaged *int64  `json:"unstaged"`
		Reason   *string `json:"reason"`
	}
	if err := strict(line, &a); err != nil || a.Unstaged == nil || *a.Unstaged != seq || a.Reason == nil {
		return "", m.fail(fmt.Errorf("answer %q to unstage %d: want {\"unstaged\": %d, \"reason\": R}", line, seq, seq))
	}
	return *a.Reason, nil
}

// CloseFiles releases the open files and any staged allocation, so the
// next visit starts from none (after a failed sample too).
func (m *Monitor) CloseFiles() error {
	line, err := m.ask("close", nil, 0)
	if err != nil {
		return m.fail(err)
	}
	var a struct {
		Closed *int64 `json:"closed"`
	}
	if err := strict(line, &a); err != nil || a.Closed == nil {
		return m.fail(fmt.Errorf("answer %q to close: want {\"closed\": N}", line))
	}
	return nil
}

// Pid is the monitor's process (replay counts its CPU time as its own).
func (m *Monitor) Pid() int { return m.cmd.Process.Pid }

// Close ends the monitor: its socket closed, then killed if it lingers.
func (m *Monitor) Close() {
	if m.cmd.ProcessState != nil {
		return
	}
	m.conn.CloseWrite()
	done := make(chan struct{})
	go func() { m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	m.conn.Close()
	for _, fd := range m.fds {
		unix.Close(fd)
	}
	m.fds = nil
}

// strict decodes one JSON object with no unknown field and nothing after.
func strict(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("line %q: %v", line, err)
	}
	if d.More() {
		return fmt.Errorf("line %q: more than one JSON value", line)
	}
	return nil
}
