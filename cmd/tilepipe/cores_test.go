package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/affinity"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// TestCoresSplit: with --threads 1 on a machine of two cores or more,
// replay keeps its own threads off the core its visits run on, and every
// visit's mask, read back from the kernel as it started, is that core.
// The audit re-derives the split and checks every visit against it: a
// visit recorded on replay's cores, and a session that claims a split
// the machine's cores do not give, are named.
func TestCoresSplit(t *testing.T) {
	long(t)
	if runtime.NumCPU() < 2 {
		t.Skip("one core: nothing to split")
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t),
		"--baseline", "naive", "--rounds", "1", "--threads", "1", "--output", dir}, fast...)
	if code, out, errs := tp(t, args...); code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	if self, err := affinity.Self(); err != nil || len(self) != runtime.NumCPU() {
		t.Errorf("after the replay this process runs on cores %v (%v), want all %d back", self, err, runtime.NumCPU())
	}
	doc := readReplay(t, filepath.Join(dir, "replay"))
	c := doc.Sessions[0].Cores
	if c == nil || c.Shared || len(c.Visit) != 1 || slices.Contains(c.Replay, c.Visit[0]) {
		t.Fatalf("session cores %+v: want one core for the visits, the rest for replay", c)
	}
	for _, v := range doc.Visits {
		if !slices.Equal(v.Cores, c.Visit) {
			t.Errorf("visit %d ran on cores %v, want %v", v.Index, v.Cores, c.Visit)
		}
		threads := 0
		for _, p := range v.Pins {
			for _, core := range p.Cores {
				threads++
				if core != c.Visit[0] {
					t.Errorf("visit %d: a thread of %s read back on core %d, want pinned to %d", v.Index, p.Comm, core, c.Visit[0])
				}
			}
		}
		if doc.Config.Pin != artifacts.PinThreads || threads == 0 {
			t.Errorf("visit %d: config.pin %q, %d threads read back (%+v): want %q and the timer's", v.Index, doc.Config.Pin, threads, v.Pins, artifacts.PinThreads)
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(d *artifacts.ReplayDoc)
		want   string
	}{
		{"visit on replay's cores", func(d *artifacts.ReplayDoc) {
			d.Visits[0].Cores = append(d.Visits[0].Cores, d.Sessions[0].Cores.Replay...)
		},
			"- visit 0: ran on cores "},
		{"thread read back on replay's core", func(d *artifacts.ReplayDoc) {
			d.Visits[0].Pins[0].Cores[0] = d.Sessions[0].Cores.Replay[0]
		}, fmt.Sprintf("- visit 0: thread 0 of %s on core %d, not one of the visit's cores %s",
			doc.Visits[0].Pins[0].Comm, c.Replay[0], affinity.List(c.Visit))},
		{"threads' read-back dropped", func(d *artifacts.ReplayDoc) { d.Visits[0].Pins = nil },
			`- visit 0: no thread read back, though config.pin is "threads"`},
		{"pin rule unknown", func(d *artifacts.ReplayDoc) { d.Config.Pin = "some" },
			`- config.pin "some": want "threads" (or absent, in a replay made before it)`},
		{"split claimed on shared cores", func(d *artifacts.ReplayDoc) {
			d.Sessions[0].Cores.Replay = nil
			d.Config.Threads = len(d.Sessions[0].Cores.Visit)
		}, "- session 0: cores "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged := copyRun(t, dir)
			forge(t, filepath.Join(forged, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *artifacts.ReplayDoc, _ *artifacts.Receipt) { tc.mutate(d) })
			code, out := auditRun(t, forged, filepath.Join(forged, "replay"))
			if code != exitFailure || !strings.Contains(out, tc.want) || !strings.Contains(out, "FAILED containment") {
				t.Errorf("audit = exit %d, want 1, containment FAILED and %q:\n%s", code, tc.want, out)
			}
		})
	}
}
