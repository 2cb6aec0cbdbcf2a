// Package telemetry reads the GPU's state around every GPU sample: replay
// runs the prepared CUDA timer's --telemetry, tilepipe's own code checked
// by digest, in a process of its own outside every visit, so no kernel
// shares its address space or can answer for it (docs/gpu.md,
// "Telemetry").
package telemetry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

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
}

func (d Device) String() string {
	return fmt.Sprintf("%s: %s at %s, driver %s", d.Telemetry, d.Device, d.Bus, d.Driver)
}

// Monitor is a running telemetry process.
type Monitor struct {
	cmd    *exec.Cmd
	in     *os.File
	out    *os.File
	r      *bufio.Reader
	stderr bytes.Buffer
	Device Device
	// IdleNs is the last reading's idle probe: ns from a launch of the
	// monitor's empty kernel to its end.
	IdleNs int64
}

// Start runs argv (the CUDA timer and "--telemetry") with env and reads
// its first line.
func Start(argv, env []string) (*Monitor, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	m := &Monitor{in: inW, out: outR, r: bufio.NewReaderSize(outR, maxLine)}
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Env, m.cmd.Stdin, m.cmd.Stdout, m.cmd.Stderr = env, inR, outW, &m.stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close ends what it started too
	m.cmd.WaitDelay = time.Second
	err = m.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	line, err := m.line()
	if err == nil {
		err = strict(line, &m.Device)
		if err == nil && (m.Device.Telemetry != samples.TelemetryNVML || m.Device.Device == "") {
			err = fmt.Errorf("first line %q: want the device it reads, from %q", line, samples.TelemetryNVML)
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
	if _, err := m.in.Write([]byte("r\n")); err != nil {
		return samples.Reading{}, m.fail(err)
	}
	line, err := m.line()
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
	if *w.IdleNs <= 0 {
		return samples.Reading{}, m.fail(fmt.Errorf("reading %q: idle_ns %d: want the idle probe's time", line, *w.IdleNs))
	}
	m.IdleNs = *w.IdleNs
	r := samples.Reading{SMMHz: *w.SMMHz, MemMHz: *w.MemMHz, TempC: *w.TempC, PowerMW: *w.PowerMW, Reasons: *w.Reasons,
		Procs: *w.Procs, PowerViolationNs: *w.PowerViolationNs, ThermalViolationNs: *w.ThermalViolationNs}
	if why := r.Implausible(); why != "" {
		return samples.Reading{}, m.fail(fmt.Errorf("reading %q: %s", line, why))
	}
	return r, nil
}

// line reads one line within Timeout.
func (m *Monitor) line() ([]byte, error) {
	if err := m.out.SetReadDeadline(time.Now().Add(Timeout)); err != nil {
		return nil, err
	}
	b, err := m.r.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
	case os.IsTimeout(err):
		return nil, fmt.Errorf("no answer in %v", Timeout)
	case err == io.EOF:
		return nil, fmt.Errorf("exited")
	case err != nil:
		return nil, err
	}
	return bytes.TrimSuffix(b, []byte("\n")), nil
}

// fail ends the monitor and names why, with its exit and stderr.
func (m *Monitor) fail(err error) error {
	if m.cmd.ProcessState == nil {
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
// (BusyNs): the reading before a sample's command or after its report,
// when no work of the visit may run. n counts the probes, worst keeps the
// slowest, for the visit's record. The monitor keeps running.
func (m *Monitor) Idle(n *int, worst *int64) (samples.Reading, error) {
	r, err := m.Read()
	if err != nil {
		return r, err
	}
	*n++
	*worst = max(*worst, m.IdleNs)
	if m.IdleNs > BusyNs {
		return r, fmt.Errorf("gpu_busy: replay's empty kernel took %d us on the GPU around a sample (idle, under %d us): GPU work of the visit ran outside its samples", m.IdleNs/1000, BusyNs/1000)
	}
	return r, nil
}

// Pid is the monitor's process (replay counts its CPU time as its own).
func (m *Monitor) Pid() int { return m.cmd.Process.Pid }

// Close ends the monitor: stdin closed, then killed if it lingers.
func (m *Monitor) Close() {
	if m.cmd.ProcessState != nil {
		return
	}
	m.in.Close()
	done := make(chan struct{})
	go func() { m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	m.out.Close()
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
