package telemetry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// monitor writes a shell monitor: a real process on the pipes replay
// uses, speaking the --telemetry protocol (the CUDA timer's own needs a
// GPU: it runs on the H200, docs/results).
func monitor(t *testing.T, script string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "monitor.sh")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", p}
}

const hello = `echo '{"telemetry": "nvml", "device": "NVIDIA H200", "bus": "00000000:19:00.0", "driver": "580.95.05", "sched": "fifo"}'` + "\n"

func TestMonitorReads(t *testing.T) {
	m, err := Start(monitor(t, hello+`n=0
while read cmd; do n=$((n+1)); echo "{\"sm_mhz\": 1980, \"mem_mhz\": 3201, \"temp_c\": $((30+n)), \"power_mw\": 120000, \"reasons\": 4, \"procs\": 1, \"power_violation_ns\": $n, \"thermal_violation_ns\": -1, \"idle_ns\": 9000}"; done
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := m.Device.String(), "nvml: NVIDIA H200 at 00000000:19:00.0, driver 580.95.05, probes fifo"; got != want {
		t.Errorf("Device = %q, want %q", got, want)
	}
	for i := int64(1); i <= 3; i++ {
		r, err := m.Read()
		want := samples.Reading{SMMHz: 1980, MemMHz: 3201, TempC: 30 + i, PowerMW: 120000, Reasons: 4, Procs: 1, PowerViolationNs: i, ThermalViolationNs: -1}
		if err != nil || r != want {
			t.Fatalf("Read %d = %+v, %v, want %+v", i, r, err, want)
		}
	}
}

// TestMonitorRefuses: a monitor that says something else than the
// protocol, or nothing, ends with the reason.
func TestMonitorRefuses(t *testing.T) {
	reading := func(s string) string { return hello + "read cmd; echo '" + s + "'; sleep 5\n" }
	for _, tc := range []struct{ name, script, want string }{
		{"no driver", "echo 'harness: error: dlopen libnvidia-ml.so.1: not found' >&2; exit 2\n",
			"telemetry: exited (exit status 2; stderr: harness: error: dlopen libnvidia-ml.so.1: not found)"},
		{"not nvml", `echo '{"telemetry": "smi", "device": "x", "bus": "", "driver": ""}'` + "\n",
			`telemetry: first line "{\"telemetry\": \"smi\", \"device\": \"x\", \"bus\": \"\", \"driver\": \"\"}": want the device it reads, from "nvml"`},
		{"a monitor from before novel rule 3", `echo '{"telemetry": "nvml", "device": "NVIDIA H200", "bus": "00000000:19:00.0", "driver": "580.95.05"}'; sleep 5` + "\n",
			`telemetry: first line "{\"telemetry\": \"nvml\", \"device\": \"NVIDIA H200\", \"bus\": \"00000000:19:00.0\", \"driver\": \"580.95.05\"}": no "sched": a monitor from before novel rule 3, which cannot stage GPU novel samples (prepare the capture again)`},
		{"unknown field", reading(`{"sm_mhz": 1, "mem_mhz": 1, "temp_c": 1, "power_mw": 1, "reasons": 0, "procs": 1, "power_violation_ns": 0, "thermal_violation_ns": 0, "fan": 3}`),
			`telemetry: line "{\"sm_mhz\": 1, \"mem_mhz\": 1, \"temp_c\": 1, \"power_mw\": 1, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"fan\": 3}": json: unknown field "fan"`},
		{"missing value", reading(`{"sm_mhz": 1, "mem_mhz": 1, "temp_c": 1, "power_mw": 1, "reasons": 0, "procs": 1, "power_violation_ns": 0}`),
			`telemetry: reading "{\"sm_mhz\": 1, \"mem_mhz\": 1, \"temp_c\": 1, \"power_mw\": 1, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0}": want every value, each -1 (unsupported) or more`},
		{"below -1", reading(`{"sm_mhz": -2, "mem_mhz": 1, "temp_c": 1, "power_mw": 1, "reasons": 0, "procs": 1, "power_violation_ns": 0, "thermal_violation_ns": 0, "idle_ns": 9000}`),
			`telemetry: reading "{\"sm_mhz\": -2, \"mem_mhz\": 1, \"temp_c\": 1, \"power_mw\": 1, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"idle_ns\": 9000}": want every value, each -1 (unsupported) or more`},
		{"two values", reading(`{"sm_mhz": 1, "mem_mhz": 1, "temp_c": 1, "power_mw": 1, "reasons": 0, "procs": 1, "power_violation_ns": 0, "thermal_violation_ns": 0, "idle_ns": 9000} {}`),
			`telemetry: line "{\"sm_mhz\": 1, \"mem_mhz\": 1, \"temp_c\": 1, \"power_mw\": 1, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"idle_ns\": 9000} {}": more than one JSON value`},
		{"zeros (the first H200 run's monitor)", reading(`{"sm_mhz": 0, "mem_mhz": 0, "temp_c": 0, "power_mw": 0, "reasons": 0, "procs": 0, "power_violation_ns": 0, "thermal_violation_ns": 0, "idle_ns": 9000}`),
			`telemetry: reading "{\"sm_mhz\": 0, \"mem_mhz\": 0, \"temp_c\": 0, \"power_mw\": 0, \"reasons\": 0, \"procs\": 0, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"idle_ns\": 9000}": SM clock 0 MHz, memory clock 0 MHz: a powered GPU has both`},
		{"no power", reading(`{"sm_mhz": 1980, "mem_mhz": 3201, "temp_c": 30, "power_mw": 0, "reasons": 0, "procs": 1, "power_violation_ns": 0, "thermal_violation_ns": 0, "idle_ns": 9000}`),
			`telemetry: reading "{\"sm_mhz\": 1980, \"mem_mhz\": 3201, \"temp_c\": 30, \"power_mw\": 0, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"idle_ns\": 9000}": 0 mW: a powered GPU draws power`},
		{"no idle probe", reading(`{"sm_mhz": 1980, "mem_mhz": 3201, "temp_c": 30, "power_mw": 1, "reasons": 0, "procs": 1, "power_violation_ns": 0, "thermal_violation_ns": 0, "idle_ns": 0}`),
			`telemetry: reading "{\"sm_mhz\": 1980, \"mem_mhz\": 3201, \"temp_c\": 30, \"power_mw\": 1, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"idle_ns\": 0}": idle_ns 0: want the idle probe's time`},
		{"died on a reading", hello + "read cmd; echo 'harness: error: nvml: nvmlDeviceGetPowerUsage: GPU is lost' >&2; exit 2\n",
			"telemetry: exited (exit status 2; stderr: harness: error: nvml: nvmlDeviceGetPowerUsage: GPU is lost)"},
		{"endless line", hello + "read cmd; head -c 10000 /dev/zero | tr '\\0' x; echo\n", "telemetry: a line longer than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Start(monitor(t, tc.script), nil)
			if err == nil {
				_, err = m.Read()
				m.Close()
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestMonitorIdle: a probe within BusyNs passes; one beyond it (the
// H200's time slice, 2.4 ms, when another process's kernel runs) fails
// with gpu_busy, counted and kept as the worst, and the monitor runs on.
func TestMonitorIdle(t *testing.T) {
	m, err := Start(monitor(t, hello+`for idle in 9000:-1 2400000:1800000 12000:0; do read cmd; echo "{\"sm_mhz\": 1980, \"mem_mhz\": 3201, \"temp_c\": 30, \"power_mw\": 120000, \"reasons\": 0, \"procs\": 1, \"power_violation_ns\": 0, \"thermal_violation_ns\": 0, \"idle_ns\": ${idle%:*}, \"idle_wait_ns\": ${idle#*:}}"; done
sleep 5
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var g Probes
	if _, err := m.Idle(&g); err != nil {
		t.Errorf("idle probe of 9 us: %v", err)
	}
	want := "gpu_busy: replay's empty kernel took 2400 us on the GPU around a sample (idle, under 500 us; 1800 us of it waiting for a CPU): GPU work of the visit ran outside its samples"
	if _, err := m.Idle(&g); err == nil || err.Error() != want {
		t.Errorf("idle probe of 2.4 ms = %v, want %s", err, want)
	}
	if _, err := m.Idle(&g); err != nil || !m.Alive() || g != (Probes{N: 3, WorstNs: 2400000, WaitNs: 1800000, WorstWaitNs: 1800000}) {
		t.Errorf("after a busy probe: %v, alive %v, %+v; want the monitor running, 3 probes, worst 2400000 of wait 1800000", err, m.Alive(), g)
	}
}

// TestMonitorClosed: Close ends a monitor that ignores stdin's end.
func TestMonitorClosed(t *testing.T) {
	m, err := Start(monitor(t, hello+"trap '' TERM; sleep 60\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if m.cmd.ProcessState == nil || !strings.Contains(m.cmd.ProcessState.String(), "killed") {
		t.Errorf("after Close: %v, want the monitor killed", m.cmd.ProcessState)
	}
}

// TestStagerAnswersRefused: a monitor whose answers to the stager's
// requests are not the protocol's (a staged answer without its
// descriptor, another sample's answer, a missing field) is ended, naming
// the answer and what was wanted. (A shell cannot pass a descriptor, so
// a staged answer of the wrong sample is the real monitor's to never
// give: TestMonitorStages.)
func TestStagerAnswersRefused(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		run          func(m *Monitor) error
		want         string
	}{
		{"staged without its descriptor", hello + `read cmd; echo '{"staged": 1, "bytes": 2097152, "upload_ns": 5}'; sleep 5` + "\n",
			func(m *Monitor) error { _, err := m.Stage(1, 2, false); return err },
			`telemetry: answer "{\"staged\": 1, \"bytes\": 2097152, \"upload_ns\": 5}" came with 0 descriptors, want 1`},
		{"a probe without its time", hello + `read cmd; echo '{"probed": 3, "idle_wait_ns": 0}'; sleep 5` + "\n",
			func(m *Monitor) error { return m.Probe(3) },
			`telemetry: reading "{\"probed\": 3, \"idle_wait_ns\": 0}": idle_ns absent: want the idle probe's time`},
		{"another sample unstaged", hello + `read cmd; echo '{"probed": 3, "idle_ns": 9000, "idle_wait_ns": 0}'; echo '{"unstaged": 4, "reason": ""}'; sleep 5` + "\n",
			func(m *Monitor) error {
				if err := m.Probe(3); err != nil {
					return err
				}
				_, err := m.Unstage(3)
				return err
			}, `telemetry: answer "{\"unstaged\": 4, \"reason\": \"\"}" to unstage 3: want {"unstaged": 3, "reason": R}`},
		{"an open without its size", hello + `read cmd; echo '{"opened": 0}'; sleep 5` + "\n",
			func(m *Monitor) error { _, err := m.Open(4, 64, nil); return err },
			`telemetry: answer "{\"opened\": 0}" to open: want {"opened": BYTES}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Start(monitor(t, tc.script), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := tc.run(m); err == nil || err.Error() != tc.want || m.Alive() {
				t.Errorf("err = %v, alive %v\nwant %s, the monitor ended", err, m.Alive(), tc.want)
			}
		})
	}
}
