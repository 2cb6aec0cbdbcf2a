package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/testroute"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/tilepipe/tilepipe/report"
)

// TestAuditFloorFailedRow: an honest checkpoint in which replay failed a
// row by its physical floor after every visit of it passed (issue 27:
// such a row was stored with ratio 0, the audit recomputed one, and the
// whole checkpoint came out BROKEN, the honest rows' claims with it). The
// run's floor for add-3x7 is made as a replay on a machine whose copy
// bandwidth measured 1 MB/s would have made it (floors.Case, so the
// audit's re-derivation of the floor agrees), the summaries recomputed
// as replay computes them (replay.Summaries, the rows below it failed
// below_physical_floor, no ratio), results.md rendered again and the
// stage re-hashed. The audit must find the checkpoint INTACT, the gemm
// rows' claims supported, the add rows' not, with the floor's reason.
func TestAuditFloorFailedRow(t *testing.T) {
	long(t)
	second := secondNaive(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16+", "+add3x7), "--routes", "", "--route-exec", testroute.Path(t),
		"--route-exec", second, "--baseline", "naive", "--rounds", "2", "--allow-load", "--output", dir}, fast...)
	if code, out, errs := tp(t, args...); code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	capDoc, prepDoc := readCapture(t, filepath.Join(dir, "capture")), readPrepared(t, filepath.Join(dir, "prepared"))
	var cases []string
	for _, c := range capDoc.Cases {
		cases = append(cases, c.Case.ID)
	}
	forgeStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
		lowered := false
		for i := range d.Sessions {
			s := &d.Sessions[i]
			for j, f := range s.Floors {
				if f.Case != "add-3x7" {
					continue
				}
				for _, c := range capDoc.Cases {
					if c.Case.ID == f.Case {
						s.Floors[j] = floors.Case(c.Case, c.Signature, d.Config.Sets, d.Config.Threads, s.ClockHz, nil, func(int) float64 { return 1e6 })
						lowered = true
					}
				}
			}
		}
		if !lowered {
			t.Fatal("the run recorded no floor for add-3x7")
		}
		rejournal(t, st, func(l *artifacts.JournalLine) { // the journal's record of each session too
			if l.Session != nil {
				l.Session.Floors = d.Sessions[l.Session.Index].Floors
			}
		})
		rows, err := samples.ReadFile(st.Store.Path(d.Samples), nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Summary = replay.Summaries(cases, d.Routes, prepDoc.Entries, d.Visits, rows, d.Config, floors.OfSessions(d.Sessions))
		failed := 0
		for _, s := range d.Summary {
			if s.Case == "add-3x7" {
				if s.Status != artifacts.StatusFailed || !strings.HasPrefix(s.Reason, "below_physical_floor") || s.RatioPairs != 0 {
					t.Fatalf("add-3x7/%s at a 1 MB/s floor: %s %q, %d ratio pairs; want failed below_physical_floor, no ratio", s.Route, s.Status, s.Reason, s.RatioPairs)
				}
				failed++
			}
		}
		if failed != 2 {
			t.Fatalf("%d add-3x7 rows failed by the floor, want 2", failed)
		}
		relayer(t, st, "results.md", func([]byte) []byte { return []byte(report.Table(*d)) })
	})
	out := filepath.Join(t.TempDir(), "audit.json")
	code, stdout, errs := tp(t, append(auditArgs(dir), "--output", out)...)
	all := stdout + errs
	for _, want := range []string{
		"audit verdict: PASS (checkpoint intact; 2 of 4 claims supported;",
		"audit: PASSED summaries: ",
		"audit: PASSED physical floor: ",
		"| add-3x7 | naive2 | failed | unsupported | - | below_physical_floor",
		"| gemm-16x16x16 | naive2 | passed | supported | ",
	} {
		if code != 0 || !strings.Contains(all, want) {
			t.Errorf("audit of the floor-failed checkpoint = exit %d, want 0 and %q\n%s", code, want, all)
		}
	}
	if bytes.Contains([]byte(all), []byte("BROKEN")) {
		t.Errorf("audit calls the checkpoint broken:\n%s", all)
	}
}
