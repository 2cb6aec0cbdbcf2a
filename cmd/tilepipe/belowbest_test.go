package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
	"github.com/tilepipe/tilepipe/report"
)

// TestBelowBest: a baseline that cannot reach its best path says so in
// the results table (issue 12). OPENBLAS_CORETYPE=Prescott in the
// environment is kept by the openblas route (a user's choice) and, on a
// CPU with AVX-512 or AVX2, is narrower than the flags allow: the build
// says why (schedule.below_best), prepare carries it to the entry, replay
// to the row, the table marks the row and lists the reason, and the audit
// passes. A replay whose rows drop the note, table re-rendered and
// re-hashed, fails the audit's summaries with the exact reason.
func TestBelowBest(t *testing.T) {
	long(t)
	needRoutes(t, "openblas")
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !strings.Contains(string(b), " avx2") {
		t.Skip("no AVX2 here: Prescott is this CPU's best path")
	}
	t.Setenv("OPENBLAS_CORETYPE", "Prescott") // capture passes it to routes
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errs := tp(t, append([]string{"run", "--cohort", tinyCohort(t, gemm16), "--routes", "openblas", "--route-exec", testroute.Path(t),
		"--baseline", "naive", "--rounds", "2", "--output", dir}, fast...)...)
	if code != exitOK {
		t.Fatalf("run = exit %d\n%s%s", code, out, errs)
	}
	doc := readReplay(t, filepath.Join(dir, "replay"))
	var why string
	for _, s := range doc.Summary {
		if s.Route == "openblas" {
			why = s.BelowBest
		} else if s.BelowBest != "" {
			t.Errorf("row %s/%s: belowBest %q, want none", s.Case, s.Route, s.BelowBest)
		}
	}
	if !strings.HasPrefix(why, "OpenBLAS runs Prescott kernels where the CPU flags ") {
		t.Fatalf("openblas row belowBest %q, want Prescott named below the flags' best", why)
	}
	table, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| gemm-16x16x16 | openblas | passed, below best path | ", "\n- openblas (gemm-16x16x16): " + why + "\n"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("results.md lacks %q:\n%s", want, table)
		}
	}

	bad := copyRun(t, dir)
	forgeStage(t, filepath.Join(bad, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
		for i := range d.Summary {
			d.Summary[i].BelowBest = ""
		}
		relayer(t, st, "results.md", func([]byte) []byte { return []byte(report.Table(*d)) })
	})
	audit := func(dir, want string) {
		t.Helper()
		code, out, errs := tp(t, auditArgs(dir)...)
		if code == exitOK || !strings.Contains(out+errs, want) {
			t.Fatalf("audit = exit %d, want %q\n%s%s", code, want, out, errs)
		}
	}
	audit(bad, fmt.Sprintf("summary gemm-16x16x16/openblas belowBest: stored \"\", the prepared entry says %q", why))

	// The note dropped from the prepared entry too, the chain re-hashed
	// from there: the capture build still says it.
	forgeStage(t, filepath.Join(bad, "prepared"), artifacts.PreparedType, nil, func(_ *artifacts.Stage, d *artifacts.PreparedDoc, _ *artifacts.Receipt) {
		for i := range d.Entries {
			d.Entries[i].BelowBest = ""
		}
	})
	rechain(t, bad)
	audit(bad, fmt.Sprintf("entry gemm-16x16x16/openblas: belowBest \"\", its capture build says %q", why))
}
