package visit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// shTimer is a timer written in sh: it answers replay's commands the way
// body says. $ok is a passing validated report, $fin a passing final one.
const shPrelude = `ok='{"type": "validated", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}, "threads": 1, "output_policy": "direct", "cold_ns": 0}'
fin='{"type": "final", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}}'
sample() { echo "{\"type\": \"sample\", \"seq\": $1, \"calls\": $2, \"ns\": ${3:-0}}" >&4; }
`

// honest answers every run with ns 0 (an instant reply is within the
// tolerance) and ends on "end".
const honest = `echo "$ok" >&4
while read -r cmd seq n <&3; do
  [ "$cmd" = end ] && { echo "$fin" >&4; while read -r _ <&3; do :; done; exit 0; }
  sample "$seq" "$n"
done
`

var tiny = Plan{Warmup: time.Millisecond, Sample: time.Millisecond, Samples: 2, Singles: 2, MaxCalls: 1}

// runSh drives a whole visit of the sh timer and returns the first
// failure's reason ("" when it passed) and the outcome.
func runSh(t *testing.T, body string, timeout time.Duration) (string, *Outcome) {
	t.Helper()
	r, out := runSpecOutcome(t, Spec{Argv: []string{"/bin/sh", "-c", shPrelude + body}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Timeout: timeout, Threads: 1})
	return r, out
}

func runSpec(t *testing.T, spec Spec) string {
	t.Helper()
	r, _ := runSpecOutcome(t, spec)
	return r
}

func runSpecOutcome(t *testing.T, spec Spec) (string, *Outcome) {
	t.Helper()
	r, err := RunAll(context.Background(), spec, func(s *Session) ([]Sample, int64, error) { return s.Drive(tiny) })
	if err != nil {
		t.Fatalf("visit: %v (want a *Failure)", err)
	}
	return r.Reason, r.Out
}

func TestSessionFailures(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // prefix of the reason; "" passes
	}{
		{"honest", honest, ""},
		{"validation failed", `echo '{"type": "validated", "status": "failed", "reason": "input_mutated: A byte 0", "checks": {"guards": "pass", "poison": "pass", "inputs": "fail", "repeat": "not_run"}, "threads": 1, "output_policy": "direct", "cold_ns": 0}' >&4`,
			"input_mutated: A byte 0"},
		{"report on stdout", `echo "$ok"; echo "$ok" >&4` + "\n" + strings.SplitN(honest, "\n", 2)[1],
			"unexpected_output: 191 bytes on stdout (a timer reports only on fd 4)"},
		{"wrong seq", `echo "$ok" >&4
while read -r cmd seq n <&3; do [ "$cmd" = end ] && { echo "$fin" >&4; exit 0; }; sample $((seq+1)) "$n"; done`,
			"unexpected_report: sample seq 2 calls 1, want seq 1 calls 1"},
		{"second report", `echo "$ok" >&4
while read -r cmd seq n <&3; do [ "$cmd" = end ] && { echo "$fin" >&4; exit 0; }; sample "$seq" "$n"; sample "$seq" "$n"; done`,
			"unexpected_report: sample seq 1 calls 1, want seq 2 calls"},
		{"a key more", `echo "$ok" >&4
while read -r cmd seq n <&3; do echo "{\"type\": \"sample\", \"seq\": $seq, \"calls\": $n, \"ns\": 0, \"fast\": true}" >&4; done`,
			`unexpected_report: sample report keys [calls fast ns seq type], want [calls ns seq type]`},
		{"not json", `echo "$ok" >&4; echo 'batch_ns: [1, 2]' >&4`,
			"unexpected_report: want one JSON object"},
		{"final out of turn", `echo "$ok" >&4; echo "$fin" >&4`,
			"unexpected_report: a final report, want sample"},
		{"after the final report", `echo "$ok" >&4
while read -r cmd seq n <&3; do [ "$cmd" = end ] && { echo "$fin" >&4; sample 99 1; exit 0; }; sample "$seq" "$n"; done`,
			`unexpected_report: "{\"type\": \"sample\", \"seq\": 99`},
		{"longer than measured", `echo "$ok" >&4
while read -r cmd seq n <&3; do [ "$cmd" = end ] && { echo "$fin" >&4; exit 0; }; sample "$seq" "$n" 900000000; done`,
			"clock_mismatch: warmup sample 0 (1 calls): replay measured "},
		{"fault report", `echo "$ok" >&4; echo '{"type": "fault", "reason": "input_written: A warm set 1 byte 8"}' >&4`,
			"input_written: A warm set 1 byte 8"},
		{"exits early", `echo "$ok" >&4; exit 3`, "exited: status 3"},
		{"killed", `echo "$ok" >&4; kill -SEGV $$`, "crashed: killed by signal 11 (segmentation fault)"},
		{"no validated report", `exit 0`, "no_report: the timer exited before its validated report"},
		{"hangs", `echo "$ok" >&4; sleep 30`, "timed_out: after 1s"},
		{"left a process", `sleep 30 &
` + honest, "left_processes: "},
		{"holds the pipe", `(setsid sleep 5 &)
` + honest, "pipe_held_open: stdout or stderr still open 2s after the visit's processes ended"},
		{"floods stderr", `head -c 1100000 /dev/zero >&2
` + honest, "output_too_large: stderr has more than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, _ := runSh(t, tc.body, time.Second)
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("visit(%s) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

// TestCheckClock feeds the cross-check samples on both sides of its
// tolerance: one sample whose timer measured more than replay's span, and
// visits whose timer reports consistently less.
func TestCheckClock(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, tc := range []struct {
		span, timer int64
		ok          bool
	}{
		{20 * ms, 20 * ms, true},
		{20 * ms, 20*ms + int64(ClockAhead), true},
		{20 * ms, 20*ms + int64(ClockAhead) + 1, false},
		{100_000, 0, true},
		{20 * ms, -1, false},
	} {
		err := CheckClock(Sample{Kind: samples.KindBatch, Calls: 8, SpanNs: tc.span, TimerNs: tc.timer})
		if (err == nil) != tc.ok {
			t.Errorf("CheckClock(span %d, timer %d) = %v, want ok %v", tc.span, tc.timer, err, tc.ok)
		}
		if want := fmt.Sprintf("clock_mismatch: batch sample 0 (8 calls): replay measured %d ns, the timer reported %d ns, more than replay's span", tc.span, tc.timer); err != nil && err.Error() != want {
			t.Errorf("CheckClock(span %d, timer %d) = %q, want %q", tc.span, tc.timer, err, want)
		}
	}
	batch := func(pairs ...int64) []Sample {
		var ss []Sample
		for i := 0; i < len(pairs); i += 2 {
			ss = append(ss, Sample{Kind: samples.KindBatch, Index: i / 2, Calls: 8, SpanNs: pairs[i], TimerNs: pairs[i+1]})
		}
		// Empty and single samples are the channel's: not in the gap.
		return append(ss, Sample{Kind: samples.KindEmpty, SpanNs: 30 * ms}, Sample{Kind: samples.KindSingle, Calls: 1, SpanNs: 30 * ms})
	}
	for _, tc := range []struct {
		name string
		ss   []Sample
		want string
	}{
		{"honest", batch(20*ms, 20*ms-30_000, 21*ms, 21*ms-40_000, 20*ms, 20*ms-35_000), ""},
		{"one late answer", batch(20*ms, 20*ms-30_000, 35*ms, 20*ms, 20*ms, 20*ms-35_000), ""},
		{"two late answers of three", batch(35*ms, 20*ms, 35*ms, 20*ms, 20*ms, 20*ms-35_000), ""},
		{"gap at the limit", batch(20*ms, 10*ms, 20*ms, 10*ms, 20*ms, 10*ms), ""},
		{"a liar (a quarter)", batch(20*ms, 5*ms, 21*ms, 5*ms, 20*ms, 5*ms),
			"clock_mismatch: batch samples: replay measured a median span of 20000000 ns, the timer reported at least 15000000 ns less in every one (allowed: 10000000 ns)"},
		{"a liar, one sample honest", batch(20*ms, 20*ms, 21*ms, 5*ms, 20*ms, 5*ms), ""},
		{"just over", batch(20*ms, 10*ms-1, 20*ms, 10*ms-1, 20*ms, 10*ms-1),
			"clock_mismatch: batch samples: replay measured a median span of 20000000 ns, the timer reported at least 10000001 ns less in every one (allowed: 10000000 ns)"},
	} {
		got := ""
		if err := CheckGap(tc.ss); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckGap(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckGapEvents: where the CUDA events are the batch samples' time,
// the median gap is bounded by the visit's own empty samples, up to
// GapMax. The attackers: a timer that shaves 10% off 20 ms samples with a
// channel of 150 µs, one that also delays its empty samples' answers to
// widen the allowance, and one that leaves one sample honest.
func TestCheckGapEvents(t *testing.T) {
	const us = int64(time.Microsecond)
	gpu := func(empty int64, gaps ...int64) []Sample {
		var ss []Sample
		for i := range 3 {
			ss = append(ss, Sample{Kind: samples.KindEmpty, Index: i, SpanNs: empty - int64(i)*10*us, Clock: samples.ClockReplay})
		}
		for i, g := range gaps {
			ss = append(ss, Sample{Kind: samples.KindBatch, Index: i, Calls: 64, SpanNs: 20_000 * us, TimerNs: 20_000*us - g, Clock: samples.ClockCUDA})
		}
		return ss
	}
	for _, tc := range []struct {
		name string
		ss   []Sample
		want string
	}{
		{"honest (the H200's widest)", gpu(631*us, 305*us, 340*us, 320*us), ""},
		{"honest, a quiet channel", gpu(91*us, 107*us, 140*us, 120*us), ""},
		{"at the bound", gpu(150*us, 400*us, 500*us, 600*us), ""},
		{"one late answer", gpu(150*us, 300*us, 4000*us, 320*us), ""},
		{"a shave of 10%", gpu(150*us, 2000*us, 2000*us, 2100*us),
			"clock_mismatch: batch samples: replay measured a median span of 20000000 ns, the CUDA events a median 2000000 ns less (allowed: 500000 ns, 2 x the slowest empty sample's 150000 ns + 200000 ns, at most 1000000 ns)"},
		{"empty answers delayed to widen the bound", gpu(5000*us, 2000*us, 2000*us, 2000*us),
			"clock_mismatch: batch samples: replay measured a median span of 20000000 ns, the CUDA events a median 2000000 ns less (allowed: 1000000 ns, 2 x the slowest empty sample's 5000000 ns + 200000 ns, at most 1000000 ns)"},
		{"shaved, one sample left honest", gpu(150*us, 2000*us, 300*us, 2000*us),
			"clock_mismatch: batch samples: replay measured a median span of 20000000 ns, the CUDA events a median 2000000 ns less (allowed: 500000 ns, 2 x the slowest empty sample's 150000 ns + 200000 ns, at most 1000000 ns)"},
	} {
		got := ""
		if err := CheckGap(tc.ss); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckGap(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestParseReport(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"type": "sample", "seq": 1, "calls": 2, "ns": 3}`, ""},
		{`{"type": "sample", "seq": 1, "calls": 2}`, "sample report keys [calls seq type], want [calls ns seq type]"},
		{`{"type": "sample", "seq": 1, "calls": 2, "ns": 3} {}`, "more than one JSON value on a line"},
		{`{"type": "sample", "seq": "1", "calls": 2, "ns": 3}`, "sample report: json: cannot unmarshal string into Go struct field Report.seq of type int64"},
		{`{"type": "report"}`, `type "report": want validated, sample, final or fault`},
		{`{"type": "fault", "reason": "input_written: A warm set 0 byte 0"}`, ""},
		{`{"type": "fault", "reason": "all good"}`, `fault report reason "all good": want one starting with one of ["input_written: " "guard_fault: "]`},
		{`{"type": "fault", "reason": "guard_fault: "}`, `fault report reason "guard_fault: ": want one starting with one of ["input_written: " "guard_fault: "]`},
		{`{"type": "fault", "reason": "guard_fault: C", "status": "ok"}`, "fault report keys [reason status type], want [reason type]"},
		{`{"type": "final", "status": "ok", "reason": "", "checks": {"guards": "pass"}}`, "final report checks: want all of [guards poison inputs repeat]"},
		{`{"type": "final", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "speed": "pass"}}`, `final report checks["speed"] = "pass": want one of [guards poison inputs repeat] with one of [pass fail not_run]`},
		{`{"type": "final", "status": "failed", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}}`, "final report: status failed without a reason"},
		{`{"type": "final", "status": "great", "reason": "", "checks": {}}`, `final report status "great": want ok or failed`},
		{`{"type": "validated", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}, "threads": 1, "output_policy": "direct", "cold_ns": 1500}`, ""},
		{`{"type": "validated", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}, "threads": 1, "output_policy": "direct"}`, "validated report keys [checks output_policy reason status threads type], want [checks cold_ns output_policy reason status threads type]"},
		{`{"type": "validated", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}, "threads": 1, "output_policy": "direct", "cold_ns": -5}`, "validated report cold_ns -5: want >= 0"},
	} {
		_, err := ParseReport([]byte(tc.line))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("ParseReport(%s) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"type": "sample", "seq": 1, "calls": 2, "ns": 3}`))
	f.Add([]byte(`{"type": "validated", "status": "ok", "reason": "", "checks": {"guards": "pass", "poison": "pass", "inputs": "pass", "repeat": "pass"}, "threads": 1, "output_policy": "direct", "cold_ns": 0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b)
		if err != nil {
			return
		}
		if _, ok := keys[r.Type]; !ok {
			t.Fatalf("ParseReport accepted type %q", r.Type)
		}
	})
}

// shMounts is the closure of /bin/sh and the tools the bodies use.
func shMounts(t *testing.T) Mounts {
	t.Helper()
	var closure []string
	for _, p := range []string{"/bin/sh", "/bin/sleep", "/lib/x86_64-linux-gnu/libc.so.6"} {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Skipf("closure of the sh timer: %v", err)
		}
		closure = append(closure, r)
	}
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	return ClosureMounts(closure, sh)
}

// TestLimiter: a visit of one thread that keeps three processes busy hits
// its cgroup's CPU quota (or, where the machine gives no cgroup, the CPU
// accounting catches it).
func TestLimiter(t *testing.T) {
	l, err := ProbeLimiter()
	if err != nil {
		t.Logf("no CPU quota here (%v): the accounting alone must catch it", err)
	}
	burn := `for i in 1 2 3; do (end=$(( $(date +%s) + 1 )); while [ $(date +%s) -le $end ]; do :; done) & done; wait
` + honest
	got := runSpec(t, Spec{Argv: []string{"/bin/sh", "-c", shPrelude + burn}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Timeout: 10 * time.Second, Threads: 1, Limiter: l})
	want := "threads_exceeded: the visit's processes used " // the accounting
	if l != nil {
		// Under the quota the accounting cannot exceed its limit: the
		// throttling names the attempt.
		want = "threads_exceeded: the visit's processes hit its CPU quota of 1.25 CPUs (1 threads x 1.25) in "
	}
	if !strings.HasPrefix(got, want) {
		t.Errorf("visit burning 3 CPUs with 1 thread = %q, want %q", got, want)
	}
}

// TestSandbox runs sh timers in the sandbox: a file outside it and the
// host's /tmp are not there, and a process left behind is found.
func TestSandbox(t *testing.T) {
	sb, err := Probe(context.Background(), "")
	if err != nil {
		if os.Getenv("TILEPIPE_REQUIRE_ROUTES") != "" {
			t.Fatalf("no sandbox, and TILEPIPE_REQUIRE_ROUTES is set (make test): %v", err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
	secret := filepath.Join(t.TempDir(), "expected.arrow")
	if err := os.WriteFile(secret, []byte("answers"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/tmp/tilepipe-visit-test-state", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove("/tmp/tilepipe-visit-test-state")
	for _, tc := range []struct{ name, body, want string }{
		{"honest", honest, ""},
		{"a stage file", "[ -e " + secret + " ] && exit 7\n" + honest, ""},
		{"host /tmp", "[ -e /tmp/tilepipe-visit-test-state ] && exit 7\n" + honest, ""},
		// The loop waits for the child to become sleep: before its exec it
		// is a second sh (seen under a loaded make test).
		{"left a process", "sleep 30 &\nuntil [ \"$(cat /proc/$!/comm)\" = sleep ]; do :; done\n" + honest, "left_processes: 1 other process(es) (sleep) still running at the final report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Argv: []string{"/bin/sh", "-c", shPrelude + tc.body}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Sandbox: sb, Mounts: shMounts(t), Timeout: 5 * time.Second, Threads: 1}
			got := runSpec(t, spec)
			if got != tc.want {
				t.Errorf("sandboxed visit(%s) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}
