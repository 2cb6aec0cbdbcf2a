package visit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// replaysOf measures a graph whose replay takes per ns (and fixed ns once
// per measurement).
func replaysOf(per, fixed int64) func(r int64) (int64, error) {
	return func(r int64) (int64, error) { return fixed + r*per, nil }
}

// TestCalibrate: adaptive_replay_span_v2's rules, case by case: a replay
// long enough ends at once; otherwise the count scales to the target by
// its ceiling; the replay and call caps bound it and end calibration;
// four attempts at most, and R is the last count measured even then.
func TestCalibrate(t *testing.T) {
	const target = 100_000_000 // 100 ms
	for _, tc := range []struct {
		name     string
		measure  func(r int64) (int64, error)
		batch    int64
		replays  int64
		attempts []int64 // the replay counts measured
	}{
		{"one replay is enough", replaysOf(90_000_000, 0), 32, 1, []int64{1}},
		{"scaled once", replaysOf(1_000_000, 0), 32, 100, []int64{1, 100}},
		{"ceiling", replaysOf(3_000_000, 0), 32, 34, []int64{1, 34}},
		// A fixed cost per measurement makes every scale-up fall short: four
		// attempts, and R is the fourth count though it missed the target.
		{"fixed cost", replaysOf(1000, 5_000_000), 1, 7391, []int64{1, 20, 399, 7391}},
		{"replay cap", replaysOf(100, 0), 1, 65536, []int64{1, 65536}},
		{"call cap", replaysOf(1000, 0), 1000, 10000, []int64{1, 10000}},
		{"zero spans", replaysOf(0, 0), 1, 8, []int64{1, 2, 4, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, att, err := Calibrate(tc.measure, tc.batch, target)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, a := range att {
				got = append(got, a.Replays)
			}
			if r != tc.replays || !equal(got, tc.attempts) {
				t.Errorf("Calibrate = R %d after %v, want R %d after %v", r, got, tc.replays, tc.attempts)
			}
			g := record(tc.batch, r, att)
			if why := CheckGraph(g, tc.batch, target, 500*time.Millisecond); why != "" {
				t.Errorf("CheckGraph(its own calibration) = %q", why)
			}
		})
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func record(batch, r int64, att []artifacts.GraphAttempt) *artifacts.GraphRecord {
	return &artifacts.GraphRecord{Protocol: GraphProtocol, Batch: batch, FirstNs: 5000, WarmupTargetNs: 500_000_000, WarmupNs: 600_000_000, WarmupReplays: 700,
		TargetNs: 100_000_000, MaxReplays: MaxGraphReplays, MaxCalls: MaxGraphCalls, Attempts: att, Replays: r}
}

// TestCheckGraph forges a recorded calibration one way at a time: each
// is refused with the reason, so a visit cannot claim a count, a target
// or a warm-up its own spans do not give.
func TestCheckGraph(t *testing.T) {
	const target = 100_000_000
	honest := func() *artifacts.GraphRecord {
		return record(32, 100, []artifacts.GraphAttempt{{Replays: 1, Ns: 1_000_000}, {Replays: 100, Ns: 99_000_000}})
	}
	if why := CheckGraph(honest(), 32, target, 500*time.Millisecond); why != "" {
		t.Fatalf("CheckGraph(honest) = %q", why)
	}
	for _, tc := range []struct {
		name string
		edit func(g *artifacts.GraphRecord)
		want string
	}{
		{"protocol", func(g *artifacts.GraphRecord) { g.Protocol = "one_replay_v1" }, `protocol "one_replay_v1", want "adaptive_replay_span_v2"`},
		{"batch", func(g *artifacts.GraphRecord) { g.Batch = 64 }, "batch 64, config.graphBatch 32"},
		{"target", func(g *artifacts.GraphRecord) { g.TargetNs = 1_000_000 }, "target 1000000 ns and warm-up 500000000 ns, config gives 100000000 and 500000000"},
		{"caps", func(g *artifacts.GraphRecord) { g.MaxReplays = 1 << 20 }, "caps 1048576 replays and 10000000 calls, want 65536 and 10000000"},
		{"short warm-up", func(g *artifacts.GraphRecord) { g.WarmupNs = 1_000_000 }, "first replay 5000 ns, warm-up 700 replays in 1000000 ns: want a warm-up of at least the target 500000000 ns"},
		{"R not the last count", func(g *artifacts.GraphRecord) { g.Replays = 200 }, "replays 200, want the last measured count 100"},
		{"count not from the spans", func(g *artifacts.GraphRecord) { g.Attempts[1].Replays = 50 }, "attempt 1: 50 replays in 99000000 ns; the protocol gives 100 replays"},
		{"stopped early", func(g *artifacts.GraphRecord) {
			g.Attempts = g.Attempts[:1]
			g.Replays = 1
		}, "attempt 0 (1000000 ns, 1 replays) ends calibration, but the protocol measures 100 replays next"},
		{"went on", func(g *artifacts.GraphRecord) {
			g.Attempts = append(g.Attempts, artifacts.GraphAttempt{Replays: 102, Ns: 101_000_000})
			g.Replays = 102
		}, "attempt 1 (99000000 ns, 100 replays) should have ended calibration"},
		{"five attempts", func(g *artifacts.GraphRecord) {
			g.Attempts = []artifacts.GraphAttempt{{Replays: 1, Ns: 10}, {Replays: 2, Ns: 10}, {Replays: 3, Ns: 10}, {Replays: 4, Ns: 10}, {Replays: 5, Ns: 10}}
		}, "5 calibration attempts, want 1 to 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := honest()
			tc.edit(g)
			if why := CheckGraph(g, 32, target, 500*time.Millisecond); !strings.HasPrefix(why, tc.want) {
				t.Errorf("CheckGraph(%s) = %q, want %q", tc.name, why, tc.want)
			}
		})
	}
}

// graphTimer is an sh timer that answers "graph SEQ R" with a graph of 32
// calls taking ns (an sh expression of $n, the replays), and everything
// else as honest does.
func graphTimer(ns string) string {
	return `echo "$ok" >&4
while read -r cmd seq n <&3; do
  [ "$cmd" = end ] && { echo "$fin" >&4; while read -r _ <&3; do :; done; exit 0; }
  if [ "$cmd" = graph ]; then sample "$seq" $((n*32)) $((` + ns + `)); continue; fi
  sample "$seq" "$n"
done
`
}

// TestDriveGraph drives graph samples against sh timers: an honest one
// (10 ns a replay) gets the protocol's calibration and samples, which
// CheckGraph accepts; a timer that answers 0 ns, or one whose warm-up never
// adds up, fails the visit with the reason instead of spinning.
func TestDriveGraph(t *testing.T) {
	const target, warmup = 20 * time.Microsecond, 40 * time.Microsecond
	for _, tc := range []struct{ name, ns, want string }{
		{"honest", "n*10", ""},
		{"untimed", "0", "graph_untimed: the first replay of a graph of 32 calls took 0 ns by the timer's events"},
		{"warm-up never ends", "1", "graph_warmup: 64 warm-up commands ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *artifacts.GraphRecord
			var graph []Sample
			spec := Spec{Argv: []string{"/bin/sh", "-c", shPrelude + graphTimer(tc.ns)}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Timeout: 30 * time.Second, Threads: 1}
			r, err := RunAll(context.Background(), spec, func(s *Session) ([]Sample, int64, error) {
				smps, n, err := s.Drive(tiny)
				if err != nil {
					return nil, n, err
				}
				graph, rec, err = s.DriveGraph(32, 2, target, warmup)
				return append(smps, graph...), n, err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(r.Reason, tc.want) || (tc.want == "") != (r.Reason == "") {
				t.Fatalf("visit = %q, want %q", r.Reason, tc.want)
			}
			if tc.want != "" {
				return
			}
			if rec.Replays != 2000 || len(rec.Attempts) != 2 || len(graph) != 2 || graph[0].Kind != samples.KindGraph || graph[0].Calls != 32*2000 || graph[1].TimerNs != 20000 {
				t.Errorf("graph = %+v, samples %+v; want R 2000 after 2 attempts, 2 samples of 64000 calls in 20000 ns", rec, graph)
			}
			if why := CheckGraph(rec, 32, target, warmup); why != "" {
				t.Errorf("CheckGraph(the drive's own record) = %q", why)
			}
		})
	}
}

// TestTelemetryAroundSamples: with Spec.Telemetry every sample, stream and
// graph alike, carries the reading taken just before its command and the
// one just after its report (readings number themselves here, so the
// order shows); a failing reading fails the visit with its error.
func TestTelemetryAroundSamples(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt int64
		want   string
	}{{"every sample", 0, ""}, {"monitor gone", 7, "telemetry: exited"}} {
		t.Run(tc.name, func(t *testing.T) {
			var n int64
			read := func() (samples.Reading, error) {
				n++
				if n == tc.failAt {
					return samples.Reading{}, errors.New("telemetry: exited")
				}
				return samples.Reading{SMMHz: n, Procs: 1, PowerViolationNs: 10 * n}, nil
			}
			var got []Sample
			spec := Spec{Argv: []string{"/bin/sh", "-c", shPrelude + graphTimer("n*10")}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Timeout: 30 * time.Second, Threads: 1, Telemetry: read}
			r, err := RunAll(context.Background(), spec, func(s *Session) ([]Sample, int64, error) {
				smps, calls, err := s.Drive(tiny)
				if err != nil {
					return nil, calls, err
				}
				graph, _, err := s.DriveGraph(32, 2, 20*time.Microsecond, 40*time.Microsecond)
				got = append(smps, graph...)
				return got, calls, err
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Reason != tc.want {
				t.Fatalf("visit = %q, want %q", r.Reason, tc.want)
			}
			if tc.want != "" {
				return
			}
			last := int64(0)
			for i, s := range got {
				b, a := s.Tel.Before.SMMHz, s.Tel.After.SMMHz
				if s.Tel.Source != samples.TelemetryNVML || a != b+1 || b <= last {
					t.Fatalf("sample %d (%s %d): telemetry %+v after reading %d: want the next two readings", i, s.Kind, s.Index, s.Tel, last)
				}
				if s.Tel.Flags() != samples.FlagPower { // the violation total grew during every sample
					t.Errorf("sample %d: flags %q, want %q", i, s.Tel.Flags(), samples.FlagPower)
				}
				last = a
			}
			if len(got) == 0 || got[len(got)-1].Kind != samples.KindGraph {
				t.Errorf("samples %+v: want stream samples, then graph samples", got)
			}
		})
	}
}
